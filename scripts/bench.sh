#!/usr/bin/env bash
# `npm run bench [NAME...]`: build, then run the benchmarks under bench/ (all, or those named) against a
# throwaway database and a Temporal dev server of their own, then print every ratio of the run.
# BENCH_SECONDS (default 10) and BENCH_CONNECTIONS (default 50) set each measurement's length and load;
# BENCH_MEMORY_SECONDS the memory benchmark's load (default 600, or 6 x BENCH_SECONDS when only that is set);
# BENCH_ROUNDS (default 3) how many rounds alternate each baseline with what it bounds.
# As `npm start` runs them: PostgreSQL with its durability on (fsync, synchronous_commit, full_page_writes;
# BENCH_PG_FAST=1 turns them off, as the test suite's clusters do), the Temporal dev server with the same
# pragmas, the service's V8 options (SERVICE_NODE_OPTIONS, scripts/lib.sh) and the service logging at LOG_LEVEL
# (default info) to a file. Results are written to
# bench/results/ (committed) and `npm run bench:table` rewrites bench/README.md's table from them.
# BENCH_SKIP_TOOLS=1 skips scripts/ensure-tools.sh (the tools are there already).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
source "$PROJECT_ROOT/scripts/lnbits.sh"
cd "$PROJECT_ROOT"

# In the order they run; each is bench/<name>.ts.
BENCHES=(reads spend-limits policy-evaluation lightning-invoices flows worker-restart memory reconciliation solana-scan scaling bursts lightning-live)
# Benchmarks that measure LNbits beside us; without it they measure only ours and say so.
LNBITS_BENCHES=(lightning-invoices)

TEMPORAL_DIR=''
BENCH_PID=''
cleanup() {
  [[ -z $BENCH_PID ]] || stop_pid "$BENCH_PID" 10
  lnbits_stop
  temporal_dev_stop
  [[ -z $TEMPORAL_DIR ]] || rm -rf "$TEMPORAL_DIR"
  pg_throwaway_cleanup
}
trap cleanup EXIT
# A signal ends the run through exit, so the EXIT trap stops what it started.
trap 'exit 130' INT
trap 'exit 143' TERM
[[ -n ${BENCH_SKIP_TOOLS:-} ]] || ensure_tools
npm run build --silent
PG_FAST=${BENCH_PG_FAST:-} pg_throwaway_database

# The embedded default's Temporal: the dev server with the same SQLite pragmas `npm start` uses.
TEMPORAL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-bench-temporal.XXXXXX")
TEMPORAL_PORT=$(free_port)
temporal_dev_start "$TEMPORAL_DIR/temporal.db" "$TEMPORAL_PORT" "$(free_port)" "$TEMPORAL_DIR/temporal.log"
export TEMPORAL_ADDRESS=127.0.0.1:$TEMPORAL_PORT TEMPORAL_CLI_PATH
TEMPORAL_CLI_PATH=$(temporal_cli_path)
# The service's log lines, as scripts/start.sh keeps them in a file; removed with the run.
export BENCH_LOG_FILE=$TEMPORAL_DIR/service.log
# For the service processes a benchmark starts (bench/support.ts, serviceProcessEnv).
export SERVICE_NODE_OPTIONS

selected=("$@")
((${#selected[@]})) || selected=("${BENCHES[@]}")
for name in "${selected[@]}"; do
  [[ " ${LNBITS_BENCHES[*]} " == *" $name "* ]] || continue
  lnbits_start || log "LNbits is not available here: the benchmarks that compare with it measure only ours"
  break
done
BENCH_STARTED_AT=$(date +%s)
export BENCH_STARTED_AT
for name in "${selected[@]}"; do
  [[ -f dist/bench/$name.js ]] || die "no benchmark named $name (bench/$name.ts)"
  log "running $name"
  # In the background so a signal's trap runs at once (bash defers it until a foreground child ends).
  # With the V8 options `npm start` gives the service (a benchmark that runs it in its own process measures it
  # so); the load generator's child processes run without them.
  node $SERVICE_NODE_OPTIONS ${BENCH_NODE_FLAGS:-} "dist/bench/$name.js" &
  BENCH_PID=$!
  wait "$BENCH_PID"
  BENCH_PID=''
done
node dist/bench/summary.js
