#!/usr/bin/env bash
# `npm start`: everything needed for a local instance, in one terminal.
#   tools -> build -> PostgreSQL (unless DATABASE_URL) -> migrations ->
#   Temporal dev server (unless TEMPORAL_ADDRESS) -> bootstrap -> worker + API.
# Ctrl-C stops what this script started; if a child dies the rest is stopped
# and the script exits non-zero.
# Settings: PG_PORT (54329), TEMPORAL_PORT (7233), TEMPORAL_UI_PORT (8233),
# HOST, PORT, DATA_DIR, plus everything the app itself reads.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
cd "$PROJECT_ROOT"

PG_PORT=${PG_PORT:-54329}
TEMPORAL_PORT=${TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-8233}
export HOST=${HOST:-127.0.0.1} PORT=${PORT:-3000}
export DATA_DIR=${DATA_DIR:-$PROJECT_ROOT/.data}
export TEMPORAL_NAMESPACE=${TEMPORAL_NAMESPACE:-default}
LOG_DIR=$DATA_DIR/logs
KEY_FILE=$DATA_DIR/root-api-key

PG_DIR_STARTED=''   # set when this script started the cluster, so it stops it too
API_PID='' WORKER_PID=''
TEMPORAL_LOCAL=''   # set when Temporal runs on this machine (ours or reused)

cleanup() {
  local rc=$?
  trap '' INT TERM  # a second Ctrl-C must not cut the shutdown short
  trap - EXIT
  if [[ -n $API_PID ]]; then log "stopping api (pid $API_PID)"; stop_pid "$API_PID" 20; fi
  if [[ -n $WORKER_PID ]]; then log "stopping worker (pid $WORKER_PID)"; stop_pid "$WORKER_PID" 30; fi
  temporal_dev_stop
  [[ -z $PG_DIR_STARTED ]] || pg_stop_cluster "$PG_DIR_STARTED"
  exit "$rc"
}
trap cleanup EXIT
trap 'log "shutting down"; exit 0' INT TERM

bash "$PROJECT_ROOT/scripts/ensure-tools.sh"
log "building"
npm run build --silent
[[ -f dist/src/server.js && -f dist/src/worker.js && -f dist/src/cli.js ]] ||
  die "the build did not produce dist/src/{server,worker,cli}.js."
mkdir -p "$DATA_DIR" "$LOG_DIR"

if [[ -z ${DATABASE_URL:-} ]]; then
  pg_start_cluster "$DATA_DIR/postgres" "$PG_PORT"
  [[ -z $PG_STARTED ]] || PG_DIR_STARTED=$DATA_DIR/postgres
  pg_create_database "postgresql://postgres@127.0.0.1:$PG_PORT/postgres" custody
  export DATABASE_URL="postgresql://postgres@127.0.0.1:$PG_PORT/custody"
fi

log "running migrations"
node dist/src/cli.js migrate

if [[ -z ${TEMPORAL_ADDRESS:-} ]]; then
  export TEMPORAL_ADDRESS=127.0.0.1:$TEMPORAL_PORT
  TEMPORAL_LOCAL=1
  if temporal_healthy "$TEMPORAL_ADDRESS"; then
    log "a Temporal server already answers on $TEMPORAL_ADDRESS; using it"
  else
    # State on disk, so workflows that were running resume after a restart.
    temporal_dev_start "$DATA_DIR/temporal/temporal.db" "$TEMPORAL_PORT" "$TEMPORAL_UI_PORT" \
      "$LOG_DIR/temporal.log" "$TEMPORAL_NAMESPACE"
  fi
fi

node dist/src/cli.js bootstrap --key-file "$KEY_FILE"

node dist/src/worker.js &
WORKER_PID=$!
node dist/src/server.js &
API_PID=$!

# Returns non-zero (after naming it) when one of our children has exited.
children_alive() {
  local rc
  if ! kill -0 "$WORKER_PID" 2>/dev/null; then
    rc=0; wait "$WORKER_PID" || rc=$?
    WORKER_PID=
    log "the worker exited (status $rc); stopping the rest"
    return 1
  fi
  if ! kill -0 "$API_PID" 2>/dev/null; then
    rc=0; wait "$API_PID" || rc=$?
    API_PID=
    log "the API exited (status $rc); stopping the rest"
    return 1
  fi
  if [[ -n $TEMPORAL_DEV_PID ]] && ! kill -0 "$TEMPORAL_DEV_PID" 2>/dev/null; then
    TEMPORAL_DEV_PID=
    log "the Temporal dev server exited (see $LOG_DIR/temporal.log); stopping the rest"
    return 1
  fi
}

api_host=$HOST
[[ $api_host != 0.0.0.0 && $api_host != "::" ]] || api_host=127.0.0.1
deadline=$((SECONDS + 60))
until tcp_open "$api_host" "$PORT"; do
  children_alive || exit 1
  ((SECONDS < deadline)) || die "the API did not listen on $api_host:$PORT within 60s."
  sleep 0.5
done

temporal_ui="none here (Temporal at $TEMPORAL_ADDRESS)"
[[ -z $TEMPORAL_LOCAL ]] || temporal_ui="http://127.0.0.1:$TEMPORAL_UI_PORT"
log "API:          http://$api_host:$PORT"
log "Temporal UI:  $temporal_ui"
log "root API key: $KEY_FILE (written on the first run only)"
log "press Ctrl-C to stop"

while children_alive; do sleep 0.5; done
exit 1
