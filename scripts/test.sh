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

TEST_DB_URL_BASE='' TEST_DB_NAME='' TEST_PG_DIR=''
cleanup() {
  local rc=$?
  trap '' INT TERM
  trap - EXIT
  if [[ -n $TEST_DB_NAME ]]; then pg_drop_database "$TEST_DB_URL_BASE" "$TEST_DB_NAME" || true; fi
  if [[ -n $TEST_PG_DIR ]]; then
    pg_stop_cluster "$TEST_PG_DIR" || true
    rm -rf "$TEST_PG_DIR"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$PROJECT_ROOT/scripts/ensure-tools.sh"
log "building"
npm run build --silent

if [[ -n ${DATABASE_URL:-} ]]; then
  TEST_DB_URL_BASE=$DATABASE_URL
  name=test_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
  pg_create_database "$TEST_DB_URL_BASE" "$name"
  TEST_DB_NAME=$name
  DATABASE_URL=$(pg_url_with_db "$TEST_DB_URL_BASE" "$name")
else
  TEST_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-test-pg.XXXXXX")
  port=$(free_port)
  PG_FAST=1 pg_start_cluster "$TEST_PG_DIR" "$port"
  pg_create_database "postgresql://postgres@127.0.0.1:$port/postgres" test
  DATABASE_URL="postgresql://postgres@127.0.0.1:$port/test"
fi

TEMPORAL_CLI_PATH=$(temporal_cli_path) || die "the Temporal CLI is missing: run scripts/ensure-tools.sh"
TEMPORAL_TEST_SERVER_PATH=$(temporal_test_server_path) || die "the Temporal test server is missing: run scripts/ensure-tools.sh"
export DATABASE_URL TEMPORAL_CLI_PATH TEMPORAL_TEST_SERVER_PATH NODE_ENV=test

rc=0
node_modules/.bin/mocha "$@" </dev/null || rc=$?
exit "$rc"
