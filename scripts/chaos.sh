#!/usr/bin/env bash
# `npm run chaos`: build, then bench/chaos.ts, which starts its own PostgreSQL cluster, Temporal (a cluster
# of separate services, or with CHAOS_TEMPORAL=dev the dev server), APIs and workers, kills each with SIGKILL
# at seeded random moments under a mixed load, and checks the invariants (docs/chaos.md). Settings:
# CHAOS_SECONDS, CHAOS_KILLS, CHAOS_SEED, CHAOS_RATE, CHAOS_IN_FLIGHT, CHAOS_SETTLE_SECONDS, CHAOS_TEMPORAL.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$PROJECT_ROOT"

ensure_tools
npm run build --silent
TEMPORAL_CLI_PATH=$(temporal_cli_path) || die "the Temporal CLI is missing: run scripts/ensure-tools.sh"
export TEMPORAL_CLI_PATH
# exec: a signal reaches the driver, whose exit stops what it started.
exec node dist/bench/chaos.js
