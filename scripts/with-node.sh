#!/usr/bin/env bash
# with-node.sh CMD...: CMD with the project's Node first on PATH (scripts/lib.sh), for package.json's scripts that run
# the service's code: `npm run cli` typed with a machine's older `node` and `npm` runs on the Node the project runs on.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec "$@"
