#!/usr/bin/env bash
# `npm run bench [NAME...]`: build, then run the benchmarks under bench/ (all, or those named) against a
# throwaway database and a Temporal dev server of their own, then print every ratio of the run.
# BENCH_SECONDS (default 10) and BENCH_CONNECTIONS (default 50) set each measurement's length and load.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
cd "$PROJECT_ROOT"

# In the order they run; each is bench/<name>.ts.
BENCHES=(reads spend-limits)

TEMPORAL_DIR=''
cleanup() {
  temporal_dev_stop
  [[ -z $TEMPORAL_DIR ]] || rm -rf "$TEMPORAL_DIR"
  pg_throwaway_cleanup
}
trap cleanup EXIT
bash "$PROJECT_ROOT/scripts/ensure-tools.sh"
npm run build --silent
pg_throwaway_database

# The embedded default's Temporal: the dev server with the same SQLite pragmas `npm start` uses.
TEMPORAL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-bench-temporal.XXXXXX")
TEMPORAL_PORT=$(free_port)
temporal_dev_start "$TEMPORAL_DIR/temporal.db" "$TEMPORAL_PORT" "$(free_port)" "$TEMPORAL_DIR/temporal.log"
export TEMPORAL_ADDRESS=127.0.0.1:$TEMPORAL_PORT TEMPORAL_CLI_PATH
TEMPORAL_CLI_PATH=$(temporal_cli_path)

selected=("$@")
((${#selected[@]})) || selected=("${BENCHES[@]}")
BENCH_STARTED_AT=$(date +%s)
export BENCH_STARTED_AT
for name in "${selected[@]}"; do
  [[ -f dist/bench/$name.js ]] || die "no benchmark named $name (bench/$name.ts)"
  log "running $name"
  node "dist/bench/$name.js"
done
node dist/bench/summary.js
