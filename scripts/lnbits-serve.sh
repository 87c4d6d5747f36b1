#!/usr/bin/env bash
# LNbits (scripts/lnbits.sh) for a caller that is not a shell script, such as test/peers/lnbits.test.ts:
# starts it, prints one JSON line {"url": ..., "invoice_key": ...} on stdout once its wallet exists, then
# runs until it gets TERM or INT, when it stops LNbits and removes its data. Exits 1, leaving nothing
# running, if LNbits cannot be started (the reason is on stderr).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/lnbits.sh"

trap lnbits_stop EXIT
trap 'exit 0' INT TERM
lnbits_start || exit 1
node -e 'console.log(JSON.stringify({ url: process.argv[1], invoice_key: process.argv[2] }))' "$LNBITS_URL" "$LNBITS_INVOICE_KEY"
# wait returns when a signal arrives (its trap then runs) or when LNbits exits on its own, an error.
wait "$LNBITS_PID" || true
log "LNbits exited on its own"
exit 1
