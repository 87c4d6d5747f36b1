#!/usr/bin/env bash
# `npm test`: build, then run mocha against a throwaway database.
#   DATABASE_URL set:   a database test_<random> on that server, dropped afterwards
#   DATABASE_URL unset: a temporary PostgreSQL cluster on a free port, removed afterwards
# Arguments are passed to mocha; the exit code is mocha's.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
cd "$PROJECT_ROOT"

cleanup() {
  local rc=$?
  trap '' INT TERM
  trap - EXIT
  pg_throwaway_cleanup
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$PROJECT_ROOT/scripts/ensure-tools.sh"
log "building"
npm run build --silent
log "linting"
npm run lint --silent

pg_throwaway_database

TEMPORAL_CLI_PATH=$(temporal_cli_path) || die "the Temporal CLI is missing: run scripts/ensure-tools.sh"
TEMPORAL_TEST_SERVER_PATH=$(temporal_test_server_path) || die "the Temporal test server is missing: run scripts/ensure-tools.sh"
export TEMPORAL_CLI_PATH TEMPORAL_TEST_SERVER_PATH NODE_ENV=test

rc=0
node_modules/.bin/mocha "$@" </dev/null || rc=$?
exit "$rc"
