#!/usr/bin/env bash
# `npm run fuzz`: schemathesis against the real API and worker (throwaway PostgreSQL, Temporal dev
# server), alone and longer than the bounded run inside `npm test`: test/fuzz.test.ts with
# FUZZ_MAX_EXAMPLES (default here 100 per operation and phase), FUZZ_SEED (default the fixed CI seed),
# FUZZ_WORKERS and FUZZ_TIMEOUT_SECONDS. See docs/fuzzing.md.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$PROJECT_ROOT"

export FUZZ_MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-100} FUZZ_TIMEOUT_SECONDS=${FUZZ_TIMEOUT_SECONDS:-7200}
log "fuzzing with $FUZZ_MAX_EXAMPLES examples per operation, seed ${FUZZ_SEED:-(fixed)}"
# The mocha options of .mocharc.json, without its spec: only the fuzz test runs.
exec bash scripts/test.sh --no-config --require dist/test/support/environment.js --reporter dist/test/support/reporter.js \
  --timeout 60000 --exit dist/test/fuzz.test.js
