#!/usr/bin/env bash
# `npm start`: everything needed for a local instance, in one terminal.
#   tools -> build -> PostgreSQL (unless DATABASE_URL) -> migrations ->
#   Temporal dev server (unless TEMPORAL_ADDRESS) -> bootstrap -> worker + API.
# It supervises what it started, as the compose file's `restart: unless-stopped`
# does: a process that exits (crash, kill -9) is started again after a backoff
# (1 s, doubling to 30 s, back to 1 s once it has stayed up 60 s) while the
# others keep serving. That holds for the API, the worker, the Temporal dev
# server (its state is on disk, so workflows resume) and the PostgreSQL
# cluster; a Temporal or PostgreSQL that cannot be started again stops it all.
# Ctrl-C (SIGINT or SIGTERM to this script) alone stops everything it started.
# Settings: the ports (README, "Ports": PORT 3000, PG_PORT 54329, TEMPORAL_PORT 7233, TEMPORAL_UI_PORT 8233),
# HOST, DATA_DIR, plus everything the app itself reads. A port something else holds stops the start at once,
# naming the variable to change; the API is believed ready only when it answers with this start's instance id.
# The connection settings are recorded in DATA_DIR/instance.json for `npm run cli` (src/cli/instance.ts).
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
TEMPORAL_DB=$DATA_DIR/temporal/temporal.db
INSTANCE_RECORD=$DATA_DIR/instance.json
api_host=$HOST
[[ $api_host != 0.0.0.0 && $api_host != "::" ]] || api_host=127.0.0.1
# This start's name for its API (GET /healthz answers it): another program listening on PORT never passes for it.
instance_id=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')

PG_DIR_STARTED=''   # set when this script started the cluster, so it stops it too
TEMPORAL_LOCAL=''   # set when Temporal runs on this machine (ours or reused)

# Supervision state per service (api, worker, temporal, postgres): its pid (empty
# while it waits to be started again), when it started, the delay before its next
# restart, and when that restart is due.
BACKOFF_MIN=1 BACKOFF_MAX=30 STABLE_AFTER=60
SUPERVISED=()
declare -A PIDS=() STARTED_AT=() BACKOFF=() RESTART_AT=()

cleanup() {
  local rc=$?
  trap '' INT TERM  # a second Ctrl-C must not cut the shutdown short
  trap - EXIT
  if [[ -n ${PIDS[api]:-} ]]; then log "stopping api (pid ${PIDS[api]})"; stop_pid "${PIDS[api]}" 20; fi
  if [[ -n ${PIDS[worker]:-} ]]; then log "stopping worker (pid ${PIDS[worker]})"; stop_pid "${PIDS[worker]}" 30; fi
  [[ -z ${PIDS[temporal]+set} ]] || TEMPORAL_DEV_PID=${PIDS[temporal]}
  temporal_dev_stop
  [[ -z $PG_DIR_STARTED ]] || pg_stop_cluster "$PG_DIR_STARTED"
  exit "$rc"
}
trap cleanup EXIT
trap 'log "shutting down"; exit 0' INT TERM

# Every port is checked before anything is installed, built or started, so a clash costs nothing. This folder's
# own cluster, left running by an earlier start, holds PG_PORT rightly.
refuse_taken_port "$api_host" "$PORT" PORT "the API"
if [[ -z ${DATABASE_URL:-} ]] && ! pg_cluster_running "$DATA_DIR/postgres"; then
  refuse_taken_port 127.0.0.1 "$PG_PORT" PG_PORT PostgreSQL
fi

ensure_tools --service

# A Temporal server already on the port is reused only when it is this data folder's own (left running by an
# earlier start); any other, or any other program on either port, stops the start here.
REUSE_TEMPORAL=''
if [[ -z ${TEMPORAL_ADDRESS:-} ]]; then
  if temporal_dev_reusable "$TEMPORAL_DB" "$TEMPORAL_PORT"; then
    REUSE_TEMPORAL=1
  else
    refuse_taken_port 127.0.0.1 "$TEMPORAL_PORT" TEMPORAL_PORT "the Temporal dev server"
    refuse_taken_port 127.0.0.1 "$TEMPORAL_UI_PORT" TEMPORAL_UI_PORT "the Temporal UI"
  fi
fi

build_if_changed
[[ -f dist/src/server.js && -f dist/src/worker.js && -f dist/src/cli.js ]] ||
  die "the build did not produce dist/src/{server,worker,cli}.js."
mkdir -p "$DATA_DIR" "$LOG_DIR"

# The postmaster's pid (pg_ctl runs it as a daemon, not as our child).
postgres_pid() { head -n 1 "$PG_DIR_STARTED/data/postmaster.pid" 2>/dev/null; }

# Memory (README, "Architecture in a screen"): V8's young generation at 4 MB semi-spaces instead of 16 MB;
# a 384 MB old generation, under which V8 lets its heap grow at most about 1.35 times the live objects
# between collections instead of up to 4 times; two glibc malloc arenas instead of up to eight per core,
# blocks of 128 KiB and more mapped on their own, and an arena's free top returned past 128 KiB.
# A NODE_OPTIONS of the caller comes last and wins.
export NODE_OPTIONS="$SERVICE_NODE_OPTIONS${NODE_OPTIONS:+ $NODE_OPTIONS}"
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072} \
  MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-131072}

# What `npm run cli` in this checkout uses while DATABASE_URL is unset (src/cli/instance.ts): this start's pid and
# connection settings, no secret. The embedded cluster's URL has none (trust, on loopback only); a DATABASE_URL with a
# password is left out (the CLI then asks for it). Key custody and Temporal credentials are kept by name only, so the
# CLI refuses to run without them rather than seal anything under the development master key.
record_instance() {
  local database_url=$DATABASE_URL
  [[ ! $database_url =~ ^postgres(ql)?://[^/@]*:[^/@]*@ && $database_url != *password=* ]] || database_url=''
  (
    umask 077
    START_PID=$$ RECORDED_DATABASE_URL=$database_url API_URL="http://$api_host:$PORT" INSTANCE_ID=$instance_id \
      NOT_RECORDED=$(compgen -e | grep -E '^(KEY_PROVIDER|MASTER_KEY|SEED_MASTER_KEY|SEED_KEY_FALLBACK|PKCS11_|TEMPORAL_API_KEY|TEMPORAL_TLS)' || true) \
      node -e '
        const env = process.env;
        console.log(JSON.stringify({
          pid: Number(env.START_PID),
          instance_id: env.INSTANCE_ID,
          api_url: env.API_URL,
          database_url: env.RECORDED_DATABASE_URL || null,
          temporal: { address: env.TEMPORAL_ADDRESS, namespace: env.TEMPORAL_NAMESPACE, task_queue: env.TEMPORAL_TASK_QUEUE || null },
          not_recorded: env.NOT_RECORDED.split("\n").filter(Boolean),
        }, null, 2));' >"$INSTANCE_RECORD.tmp"
  )
  mv "$INSTANCE_RECORD.tmp" "$INSTANCE_RECORD"
}

start_service() {
  local name=$1
  case $name in
    # The API is never given the seed key, in any configuration (docs/custody.md, "Key custody"): wallets'
    # first keys and signatures go through the worker, as in production.
    api) env -u SEED_MASTER_KEY -u SEED_MASTER_KEY_PREVIOUS -u PKCS11_SEED_KEY_LABEL -u PKCS11_SEED_PREVIOUS_KEY_LABELS \
      SEED_KEY_FALLBACK=none INSTANCE_ID="$instance_id" node dist/src/server.js & PIDS[api]=$! ;;
    worker) node dist/src/worker.js & PIDS[worker]=$! ;;
    temporal)
      temporal_dev_start "$TEMPORAL_DB" "$TEMPORAL_PORT" "$TEMPORAL_UI_PORT" \
        "$LOG_DIR/temporal.log" "$TEMPORAL_NAMESPACE"
      PIDS[temporal]=$TEMPORAL_DEV_PID ;;
    postgres)
      pg_start_cluster "$PG_DIR_STARTED" "$PG_PORT" PG_PORT
      PIDS[postgres]=$(postgres_pid) ;;
  esac
  STARTED_AT[$name]=$SECONDS
}

supervise() {
  local name=$1
  SUPERVISED+=("$name")
  BACKOFF[$name]=$BACKOFF_MIN
  start_service "$name"
}

# One pass over the supervised services: notices exits, restarts those whose backoff has passed.
supervise_tick() {
  local name pid rc status delay
  for name in "${SUPERVISED[@]}"; do
    pid=${PIDS[$name]}
    if [[ -n $pid ]]; then
      kill -0 "$pid" 2>/dev/null && continue
      status=''
      if [[ $name != postgres ]]; then rc=0; wait "$pid" 2>/dev/null || rc=$?; status=" (status $rc)"; fi
      PIDS[$name]=''
      # A process that had stayed up a while crashed afresh: start the backoff over.
      ((SECONDS - STARTED_AT[$name] < STABLE_AFTER)) || BACKOFF[$name]=$BACKOFF_MIN
      delay=${BACKOFF[$name]}
      BACKOFF[$name]=$((delay * 2 < BACKOFF_MAX ? delay * 2 : BACKOFF_MAX))
      RESTART_AT[$name]=$((SECONDS + delay))
      log "$name (pid $pid) exited$status; restarting it in ${delay}s"
    elif ((SECONDS >= RESTART_AT[$name])); then
      log "restarting $name"
      start_service "$name"
    fi
  done
}

if [[ -z ${DATABASE_URL:-} ]]; then
  pg_start_cluster "$DATA_DIR/postgres" "$PG_PORT" PG_PORT
  if [[ -n $PG_STARTED ]]; then
    PG_DIR_STARTED=$DATA_DIR/postgres
    SUPERVISED+=(postgres) BACKOFF[postgres]=$BACKOFF_MIN PIDS[postgres]=$(postgres_pid) STARTED_AT[postgres]=$SECONDS
  fi
  pg_create_database "postgresql://postgres@127.0.0.1:$PG_PORT/postgres" custody
  export DATABASE_URL="postgresql://postgres@127.0.0.1:$PG_PORT/custody"
fi

log "running migrations"
node dist/src/cli.js migrate

if [[ -z ${TEMPORAL_ADDRESS:-} ]]; then
  export TEMPORAL_ADDRESS=127.0.0.1:$TEMPORAL_PORT
  TEMPORAL_LOCAL=1
  if [[ -n $REUSE_TEMPORAL ]]; then
    log "the Temporal server started for $DATA_DIR already answers on $TEMPORAL_ADDRESS; using it"
  else
    # State on disk, so workflows that were running resume after a restart.
    supervise temporal
  fi
fi

record_instance

node dist/src/cli.js bootstrap --key-file "$KEY_FILE"

supervise worker
supervise api

# Ready when our API answers with our instance id. Anything else answering there took PORT after the check above.
# 180 s: a loaded machine (two cores under a whole test suite) took over 60 s to load the API.
deadline=$((SECONDS + 180))
until health=$(http_get "$api_host" "$PORT" /healthz) && [[ $health == *"$instance_id"* ]]; do
  [[ -z $health ]] || die "something other than this start's API answers on $api_host:$PORT (PORT): set PORT to a free port."
  supervise_tick
  ((SECONDS < deadline)) || die "the API did not answer on $api_host:$PORT (PORT) within 180s (see its output above)."
  sleep 0.5
done

temporal_ui="none here (Temporal at $TEMPORAL_ADDRESS)"
[[ -z $TEMPORAL_LOCAL ]] || temporal_ui="http://127.0.0.1:$TEMPORAL_UI_PORT"
log "API:          http://$api_host:$PORT"
log "Temporal UI:  $temporal_ui"
log "root API key: $KEY_FILE (written on the first run only)"
cli='npm run cli -- <command>'
[[ $DATA_DIR == "$PROJECT_ROOT/.data" ]] || cli="DATA_DIR=$DATA_DIR $cli"
log "CLI:          $cli (no DATABASE_URL needed while this runs: $INSTANCE_RECORD)"
log "press Ctrl-C to stop"

while true; do
  supervise_tick
  sleep 0.5
done
