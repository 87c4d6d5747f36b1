#!/usr/bin/env bash
# `npm test`: build, lint, then run mocha against a throwaway database server.
#   DATABASE_URL set:   databases test_<random>(_p<pid>) on that server, dropped afterwards
#   DATABASE_URL unset: a temporary PostgreSQL cluster on a free port, removed afterwards
# The whole suite runs in TEST_JOBS processes at once (default 4 on any machine: the tests wait on nodes and
# timers more than they compute), each with a database and a Temporal dev server of its own (test/support/environment.ts),
# then the secret scan alone over what they all left. With arguments, mocha runs them in one process
# (`npm test -- --grep Idempotency`, `npm test -- dist/test/api/cards.test.js`). The exit code is mocha's.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
cd "$PROJECT_ROOT"

TEST_ARTIFACTS_DIR='' TEST_SUMMARY_DIR='' COMPILE_CACHE_DIR='' fuzz_pid='' lint_pid='' census_pid=''
cleanup() {
  local rc=$?
  trap '' INT TERM
  trap - EXIT
  [[ -z $fuzz_pid ]] || kill "$fuzz_pid" 2>/dev/null || true
  [[ -z $lint_pid ]] || kill "$lint_pid" 2>/dev/null || true
  [[ -z $census_pid ]] || kill "$census_pid" 2>/dev/null || true
  rm -rf "$TEST_ARTIFACTS_DIR" "$TEST_SUMMARY_DIR" "$COMPILE_CACHE_DIR"
  pg_throwaway_cleanup
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_tools
# The types generated from the OpenAPI document first (the linter reads them), then the build and the linter at once:
# each type-checks the whole project on one core. The build is recorded, so that `npm start` (and the tests that run
# it) find dist/ current and do not build again.
build_inputs=$(build_inputs_digest)
node scripts/openapi-types.cjs
log "building and linting"
npm run lint --silent &
lint_pid=$!
npm run build --silent
record_build "$build_inputs"
wait "$lint_pid" || die "the linter found problems (above)"

pg_throwaway_database

TEMPORAL_CLI_PATH=$(temporal_cli_path) || die "the Temporal CLI is missing: run scripts/ensure-tools.sh"
TEMPORAL_TEST_SERVER_PATH=$(temporal_test_server_path) || die "the Temporal test server is missing: run scripts/ensure-tools.sh"
export TEMPORAL_CLI_PATH TEMPORAL_TEST_SERVER_PATH NODE_ENV=test
# Node's compile cache, for every Node process of the run: the tests start the CLI and the service (`npm start`, its
# API and worker) dozens of times, and each compiles the whole service again without it (1.4 CPU-seconds a CLI
# command, 0.9 with it). A process writes what it compiled as it exits, for the ones started after it.
COMPILE_CACHE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-compile-cache.XXXXXX")
export NODE_COMPILE_CACHE=$COMPILE_CACHE_DIR

# .mocharc.json without its spec (mocha adds a config's spec to the files it is given), and a test given twice its
# time: three processes on two cores make a node's start or a long simulation slower than alone.
MOCHA=(node_modules/.bin/mocha --no-config --require dist/test/support/environment.js --reporter dist/test/support/reporter.js --timeout 120000 --exit)
if (($#)); then
  # The files named, or every file when none is (`npm test -- --grep Idempotency`).
  [[ " $* " == *.js\ * ]] || set -- "$@" 'dist/test/**/*.test.js'
  rc=0
  "${MOCHA[@]}" "$@" </dev/null || rc=$?
  exit "$rc"
fi

# What each process leaves for the secret scan, and each run's counts (test/support/reporter.ts).
TEST_ARTIFACTS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-test-artifacts.XXXXXX")
TEST_SUMMARY_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-test-summary.XXXXXX")
export TEST_ARTIFACTS_DIR
SECRET_SCAN=dist/test/zz-secret-scan.test.js FUZZ=dist/test/fuzz.test.js
# Mocha hands files to its processes in this order: the longest first, so that none is left running alone at
# the end (each run prints its slowest files, to keep this list true).
LONGEST_FIRST=(chaos postgres-failover api/sponsorship workflows/payout-trip chains/anvil-fee-bumping api/transactions chains/btcd-fee-bumping
  chains/anvil-sends readme-quick-start second-instance replicas cli chains/anvil-reorgs workflows/send-transaction
  chains/anvil-sponsorship api/consolidation-ledger api/payouts workflows/lightning api/cards)
files=()
for name in "${LONGEST_FIRST[@]}"; do [[ ! -f dist/test/$name.test.js ]] || files+=("dist/test/$name.test.js"); done
while IFS= read -r file; do
  [[ $file == "$SECRET_SCAN" || $file == "$FUZZ" || " ${files[*]} " == *" $file "* ]] || files+=("$file")
done < <(find dist/test -name '*.test.js' | sort)
started=$(date +%s)
rc=0
# The machine's CPU by program over the run, for the summary: the suite is bound by CPU.
export TEST_CPU_CENSUS_FILE=$TEST_SUMMARY_DIR/cpu.census
node dist/test/support/cpu-census.js "$TEST_CPU_CENSUS_FILE" &
census_pid=$!
# The bounded fuzz run in a process of its own beside them, with its database and dev server: what the fuzzer
# leaves on the sandbox devnet (anything any operation allows) must not meet another file's tests.
TEST_SUMMARY_FILE=$TEST_SUMMARY_DIR/fuzz.json "${MOCHA[@]}" "$FUZZ" </dev/null &
fuzz_pid=$!
TEST_SUMMARY_FILE=$TEST_SUMMARY_DIR/suite.json "${MOCHA[@]}" --parallel --jobs "${TEST_JOBS:-4}" "${files[@]}" </dev/null || rc=$?
wait "$fuzz_pid" || rc=$?
# The scan alone, after every other process has exited.
TEST_SUMMARY_FILE=$TEST_SUMMARY_DIR/scan.json "${MOCHA[@]}" "$SECRET_SCAN" </dev/null || rc=$?
kill -TERM "$census_pid" && wait "$census_pid" || true
census_pid=''
node dist/test/support/summary.js "$TEST_SUMMARY_DIR"/*.json
log "the suite took $(($(date +%s) - started)) s in ${TEST_JOBS:-4} processes"
exit "$rc"
