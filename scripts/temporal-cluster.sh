#!/usr/bin/env bash
# A Temporal cluster as production runs one, here on loopback: the server built by scripts/ensure-tools.sh
# (.tools/temporal-server) on a PostgreSQL server, its frontend, matching, worker and two history services
# each a process of its own (docs/temporal-cluster.md).
#
#   temporal-cluster.sh start DIR          setup, every service, the namespace; runs until INT or TERM, then
#                                          stops every service it started (on every way out)
#   temporal-cluster.sh setup DIR          the two databases, their schemas (temporal-sql-tool), the ports and
#                                          the configuration in DIR; again on the same DIR: the same ports,
#                                          schemas brought up to date
#   temporal-cluster.sh service DIR NAME   one service in the foreground (exec: the pid is the server's):
#                                          frontend, history-1, history-2, matching or worker
#   temporal-cluster.sh namespace DIR      once the frontend answers: the namespace (with its retention) and
#                                          the search attributes, each unless it exists
#
# Settings (environment, read by setup, except the namespace ones):
#   TEMPORAL_CLUSTER_PG_HOST, _PG_PORT, _PG_USER, _PG_PASSWORD   the PostgreSQL server (127.0.0.1, 5432, postgres, none)
#   TEMPORAL_CLUSTER_DATABASE, _VISIBILITY_DATABASE             its databases (temporal, temporal_visibility)
#   TEMPORAL_CLUSTER_PORT        the frontend's gRPC port (7233; 0: a free one); the other ports are free ones
#   TEMPORAL_CLUSTER_SHARDS      history shards (4): fixed when the databases are made, never changed after
#   TEMPORAL_CLUSTER_NAMESPACE   (default) and TEMPORAL_CLUSTER_RETENTION (72h)
#   TEMPORAL_CLUSTER_SEARCH_ATTRIBUTES  "Name=Type ..." (the three Keywords the service's workflows set)
# DIR/ports.env holds the ports (FRONTEND_PORT is the address clients use: 127.0.0.1:$FRONTEND_PORT), DIR/logs
# each service's output.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SERVICES=(frontend history-1 history-2 matching worker)

server_dir() {
  temporal_server_dir || die "the Temporal server is not built: run scripts/ensure-tools.sh (it needs Go), or set TEMPORAL_SERVER_DIR"
}

# sql_tool DATABASE ARGS...: temporal-sql-tool on the configured PostgreSQL server.
sql_tool() {
  local database=$1
  shift
  local args=(--plugin postgres12 --endpoint "${TEMPORAL_CLUSTER_PG_HOST:-127.0.0.1}" --port "${TEMPORAL_CLUSTER_PG_PORT:-5432}"
    --user "${TEMPORAL_CLUSTER_PG_USER:-postgres}" --database "$database" --quiet)
  [[ -z ${TEMPORAL_CLUSTER_PG_PASSWORD:-} ]] || args+=(--password "$TEMPORAL_CLUSTER_PG_PASSWORD")
  "$(server_dir)/bin/temporal-sql-tool" "${args[@]}" "$@"
}

# The databases and their schemas: created when missing (one that exists counts as created), then every versioned
# step not applied yet; the tool's output in LOG.
setup_schemas() {
  local log=$1 schema database kind
  schema="$(server_dir)/schema/postgresql/v12"
  for kind in temporal visibility; do
    if [[ $kind == temporal ]]; then database=${TEMPORAL_CLUSTER_DATABASE:-temporal}; else database=${TEMPORAL_CLUSTER_VISIBILITY_DATABASE:-temporal_visibility}; fi
    # Version 0.0 makes only the schema_version tables (a no-op when they are there); update-schema applies the rest.
    if ! { sql_tool "$database" create-database && sql_tool "$database" setup-schema -v 0.0 &&
      sql_tool "$database" update-schema -d "$schema/$kind/versioned"; } >>"$log" 2>&1; then
      tail -n 5 "$log" >&2
      die "temporal-sql-tool could not set up $database on PostgreSQL at ${TEMPORAL_CLUSTER_PG_HOST:-127.0.0.1}:${TEMPORAL_CLUSTER_PG_PORT:-5432} (see $log)"
    fi
  done
}

# A port: the one asked for, or a free one.
port_or_free() { if [[ ${1:-0} != 0 ]]; then printf '%s\n' "$1"; else free_port; fi; }

write_ports() {
  local file=$1/ports.env name
  [[ -f $file ]] && return 0
  {
    printf 'FRONTEND_PORT=%s\nFRONTEND_HTTP_PORT=%s\n' "$(port_or_free "${TEMPORAL_CLUSTER_PORT:-7233}")" "$(free_port)"
    for name in FRONTEND HISTORY_1 HISTORY_2 MATCHING WORKER; do
      [[ $name == FRONTEND ]] || printf '%s_PORT=%s\n' "$name" "$(free_port)"
      printf '%s_MEMBERSHIP_PORT=%s\n' "$name" "$(free_port)"
    done
  } >"$file.tmp"
  mv "$file.tmp" "$file"
}

# write_config FILE HISTORY_PORT HISTORY_MEMBERSHIP_PORT: the server's configuration; the two history processes
# differ only in their ports (each announces its own in the membership ring, so one loopback address serves both).
write_config() {
  local file=$1 history_port=$2 history_membership_port=$3 password=${TEMPORAL_CLUSTER_PG_PASSWORD:-}
  local store
  cat >"$file" <<YAML
# Written by scripts/temporal-cluster.sh setup.
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: ${TEMPORAL_CLUSTER_SHARDS:-4}
  datastores:
YAML
  for store in default visibility; do
    cat >>"$file" <<YAML
    postgres-$store:
      sql:
        pluginName: postgres12
        databaseName: "$(if [[ $store == default ]]; then echo "${TEMPORAL_CLUSTER_DATABASE:-temporal}"; else echo "${TEMPORAL_CLUSTER_VISIBILITY_DATABASE:-temporal_visibility}"; fi)"
        connectAddr: "${TEMPORAL_CLUSTER_PG_HOST:-127.0.0.1}:${TEMPORAL_CLUSTER_PG_PORT:-5432}"
        connectProtocol: tcp
        user: "${TEMPORAL_CLUSTER_PG_USER:-postgres}"
        password: "$password"
        maxConns: $(if [[ $store == default ]]; then echo 10; else echo 4; fi)
        maxIdleConns: $(if [[ $store == default ]]; then echo 10; else echo 4; fi)
        maxConnLifetime: 1h
YAML
  done
  cat >>"$file" <<YAML
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
services:
  frontend:
    rpc: { grpcPort: $FRONTEND_PORT, membershipPort: $FRONTEND_MEMBERSHIP_PORT, httpPort: $FRONTEND_HTTP_PORT, bindOnLocalHost: true }
  history:
    rpc: { grpcPort: $history_port, membershipPort: $history_membership_port, bindOnLocalHost: true }
  matching:
    rpc: { grpcPort: $MATCHING_PORT, membershipPort: $MATCHING_MEMBERSHIP_PORT, bindOnLocalHost: true }
  worker:
    rpc: { grpcPort: $WORKER_PORT, membershipPort: $WORKER_MEMBERSHIP_PORT, bindOnLocalHost: true }
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: 127.0.0.1:$FRONTEND_PORT
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: $(dirname "$file")/dynamic-config.yaml
  pollInterval: 60s
YAML
}

setup() {
  local dir=$1
  mkdir -p "$dir/logs"
  setup_schemas "$dir/logs/schema.log"
  write_ports "$dir"
  # shellcheck disable=SC1091
  source "$dir/ports.env"
  write_config "$dir/history-1.yaml" "$HISTORY_1_PORT" "$HISTORY_1_MEMBERSHIP_PORT"
  write_config "$dir/history-2.yaml" "$HISTORY_2_PORT" "$HISTORY_2_MEMBERSHIP_PORT"
  # A search attribute registered a moment ago is usable at once (as on the dev server), not after a cache refresh.
  printf 'system.forceSearchAttributesCacheRefreshOnRead:\n  - value: true\n' >"$dir/dynamic-config.yaml"
}

service() {
  local dir=$1 name=$2 config service
  case $name in
    history-1 | history-2) config=$dir/$name.yaml service=history ;;
    frontend | matching | worker) config=$dir/history-1.yaml service=$name ;;
    *) die "unknown service $name (one of: ${SERVICES[*]})" ;;
  esac
  [[ -f $config ]] || die "no configuration in $dir: run setup first"
  exec "$(server_dir)/bin/temporal-server" --config-file "$config" --allow-no-auth start --service "$service"
}

# Each succeeds once the thing exists, creating it when missing: a create that went through but whose answer was
# lost (the frontend answers before every history shard is owned, and its first requests may fail) is found next time.
namespace_ready() {
  "$cli" operator namespace describe --address "$address" --namespace "$namespace" >/dev/null 2>&1 ||
    "$cli" operator namespace create --address "$address" --namespace "$namespace" --retention "${TEMPORAL_CLUSTER_RETENTION:-72h}"
}
search_attribute_ready() {
  "$cli" operator search-attribute list --address "$address" --namespace "$namespace" 2>/dev/null | grep -qw "${1%%=*}" ||
    "$cli" operator search-attribute create --address "$address" --namespace "$namespace" --name "${1%%=*}" --type "${1#*=}"
}

namespace() {
  local dir=$1 attribute
  cli=$(temporal_cli_path) || die "the Temporal CLI is missing: run scripts/ensure-tools.sh"
  namespace=${TEMPORAL_CLUSTER_NAMESPACE:-default}
  # shellcheck disable=SC1091
  source "$dir/ports.env"
  address=127.0.0.1:$FRONTEND_PORT
  wait_for 120 temporal_healthy "$address" || die "the frontend does not answer on $address (see $dir/logs)"
  wait_for 120 namespace_ready || die "could not create the namespace $namespace on $address (see $dir/logs)"
  for attribute in ${TEMPORAL_CLUSTER_SEARCH_ATTRIBUTES:-OrganizationId=Keyword ResourceType=Keyword ResourceId=Keyword}; do
    wait_for 60 search_attribute_ready "$attribute" || die "could not register the search attribute $attribute (see $dir/logs)"
  done
}

STARTED_PIDS=()
stop_started() {
  local pid
  trap '' INT TERM
  # In reverse: the frontend, started first, goes last.
  for ((i = ${#STARTED_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${STARTED_PIDS[i]}
    stop_pid "$pid" 20
  done
  STARTED_PIDS=()
}

start() {
  local dir=$1 name started=$SECONDS
  trap stop_started EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  setup "$dir"
  # shellcheck disable=SC1091
  source "$dir/ports.env"
  for name in "${SERVICES[@]}"; do
    bash "${BASH_SOURCE[0]}" service "$dir" "$name" >>"$dir/logs/$name.log" 2>&1 </dev/null &
    STARTED_PIDS+=($!)
    # The first process writes the cluster's metadata record; others starting meanwhile fail on it. The frontend
    # listens once it is written.
    if [[ $name == frontend ]]; then
      wait_for 120 tcp_open 127.0.0.1 "$FRONTEND_PORT" || die "the frontend did not start (see $dir/logs/frontend.log)"
    fi
  done
  namespace "$dir"
  log "the Temporal cluster is up on 127.0.0.1:$FRONTEND_PORT in $((SECONDS - started)) s (services: ${SERVICES[*]}; pids ${STARTED_PIDS[*]}; logs in $dir/logs)"
  # Until a signal, or until a service exits on its own (then everything stops: a half cluster is no cluster).
  wait -n "${STARTED_PIDS[@]}" || true
  die "a Temporal service exited (see $dir/logs)"
}

command=${1:-}
[[ -n $command && -n ${2:-} ]] || die "usage: $0 start|setup|namespace DIR | service DIR NAME"
dir=$(mkdir -p "$2" && cd "$2" && pwd)
case $command in
  start) start "$dir" ;;
  setup) setup "$dir" ;;
  service) service "$dir" "${3:?the service name}" ;;
  namespace) namespace "$dir" ;;
  *) die "unknown command $command" ;;
esac
