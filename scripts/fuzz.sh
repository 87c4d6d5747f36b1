#!/usr/bin/env bash
# `npm run fuzz`: schemathesis against the real API and worker (throwaway PostgreSQL, Temporal dev
# server), alone and longer than the bounded run inside `npm test`: test/fuzz.test.ts with
# FUZZ_MAX_EXAMPLES (default here 100 per operation and phase), FUZZ_SEED (default a fresh random one,
# printed so a find can be replayed), FUZZ_POSITIVE_DATA (default 1: the positive-data check on),
# FUZZ_WORKERS, FUZZ_RUNS and FUZZ_TIMEOUT_SECONDS. See docs/fuzzing.md.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$PROJECT_ROOT"

# A fresh seed each run finds what the fixed CI seed cannot; it is printed for replaying a find.
FUZZ_SEED=${FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
export FUZZ_SEED FUZZ_MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-100} FUZZ_TIMEOUT_SECONDS=${FUZZ_TIMEOUT_SECONDS:-7200} FUZZ_POSITIVE_DATA=${FUZZ_POSITIVE_DATA:-1}
log "fuzzing with $FUZZ_MAX_EXAMPLES examples per operation, seed $FUZZ_SEED (replay: FUZZ_SEED=$FUZZ_SEED npm run fuzz), positive data $FUZZ_POSITIVE_DATA"
exec bash scripts/test.sh dist/test/fuzz.test.js
