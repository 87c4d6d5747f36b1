#!/usr/bin/env bash
# `npm run bench`: build, then run the benchmarks under bench/ against a throwaway database.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
cd "$PROJECT_ROOT"

trap 'pg_throwaway_cleanup' EXIT
bash "$PROJECT_ROOT/scripts/ensure-tools.sh"
npm run build --silent
pg_throwaway_database
node dist/bench/api-keys-me.js
