# shellcheck shell=bash disable=SC2034 # PG_STARTED is for the callers
# Project-local PostgreSQL clusters. Source it after lib.sh.
#
#   pg_bin_dir                     print the folder holding initdb, pg_ctl and postgres
#   pg_start_cluster DIR PORT [VARIABLE]
#                                  init DIR if needed and start it on 127.0.0.1:PORT;
#                                  idempotent; sets PG_STARTED=1 only if it started it.
#                                  PG_FAST=1: no fsync (throwaway test clusters). Errors about
#                                  the port name VARIABLE (the setting that chose it), if given
#   pg_cluster_running DIR         succeed when the cluster in DIR runs
#   pg_stop_cluster DIR            stop it if it runs
#   pg_start_standby PRIMARY_PORT NAME DIR PORT
#                                  a streaming standby of the cluster on 127.0.0.1:PRIMARY_PORT: copied into DIR
#                                  (pg_basebackup -R) through a physical replication slot NAME, streaming as
#                                  application_name NAME, started on PORT as pg_start_cluster starts a cluster
#   pg_require_synchronous_standby URL NAME
#                                  make the primary at URL commit only once standby NAME has the commit on disk
#                                  (synchronous_standby_names, synchronous_commit on), and wait until it streams in sync
#   pg_promote DIR                 promote the standby in DIR to a primary (pg_ctl promote) and wait for it
#   pg_url_with_db URL NAME        print URL with its database replaced by NAME
#   pg_create_database URL NAME    create database NAME on URL's server unless it exists
#   pg_drop_database URL NAME      drop database NAME on URL's server (forcefully)
#
# Layout of DIR: data/ (PGDATA), run/ (unix socket), postgres.log.
# PostgreSQL refuses to run as root, so as root every server-side command runs
# as the `postgres` system user, which owns DIR.

pg_bin_dir() {
  local d c
  local candidates=()
  # What PATH finds first (through symlinks, so pg_ctl finds its own postgres),
  # then Debian's versioned folders, newest first.
  if c=$(command -v initdb 2>/dev/null); then candidates+=("$(dirname "$(readlink -f "$c")")"); fi
  while IFS= read -r d; do candidates+=("$d"); done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV)
  for d in "${candidates[@]}"; do
    if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then printf '%s\n' "$d"; return 0; fi
  done
  return 1
}

# Run a server-side command as the cluster's owner.
_pg_as_owner() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

_pg_prepare_dir() {
  local dir=$1
  mkdir -p "$dir"
  [[ $(id -u) == 0 ]] || return 0
  if ! id -u postgres >/dev/null 2>&1; then
    log "creating the postgres system user"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin postgres
  fi
  [[ $(stat -c %U "$dir") == postgres ]] || chown -R postgres: "$dir"
  runuser -u postgres -- test -w "$dir" ||
    die "the postgres user cannot reach $dir: make its parent folders searchable (chmod o+x) or set DATABASE_URL."
}

pg_cluster_running() {
  local dir=$1 bin
  [[ -f $dir/data/PG_VERSION ]] || return 1
  bin=$(pg_bin_dir) || return 1
  (cd "$dir" && _pg_as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1)
}

pg_start_cluster() {
  local dir port bin named
  dir=$(mkdir -p "$1" && cd "$1" && pwd) port=$2 named=${3:+ ($3)}
  PG_STARTED=''
  bin=$(pg_bin_dir) || die "PostgreSQL server binaries were not found: run scripts/ensure-tools.sh or set DATABASE_URL."
  _pg_prepare_dir "$dir"
  # Commands run from inside DIR so the postgres user never sits in an unreadable cwd.
  (
    cd "$dir"
    if [[ ! -f data/PG_VERSION ]]; then
      log "initialising PostgreSQL cluster in $dir/data"
      local sync=()
      [[ -z ${PG_FAST:-} ]] || sync=(--no-sync)
      _pg_as_owner "$bin/initdb" -D "$dir/data" --auth=trust -U postgres --encoding=UTF8 --no-locale \
        ${sync[@]+"${sync[@]}"} >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed in $dir/data"; }
    fi
    _pg_as_owner mkdir -p "$dir/run"
  ) || exit 1
  if pg_cluster_running "$dir"; then
    # The fourth line of postmaster.pid is the port it listens on: one started on another port is not waited for.
    local running
    running=$(sed -n 4p "$dir/data/postmaster.pid" 2>/dev/null) || running=''
    [[ -z $running || $running == "$port" ]] ||
      die "PostgreSQL in $dir already runs on port $running, not on $port$named: stop it, or set ${3:-the port} to $running."
    log "PostgreSQL in $dir is already running"
  else
    # -h/-k/-p: listen on loopback only, socket inside DIR, given port.
    # pg_ctl hands -o to a shell, hence the inner quotes around the path.
    local opts="-h 127.0.0.1 -p $port -k '$dir/run'"
    # The test cluster also takes more connections: the suite's processes each hold a pool and start services of their own.
    [[ -z ${PG_FAST:-} ]] || opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400"
    log "starting PostgreSQL on 127.0.0.1:$port (log $dir/postgres.log)"
    if ! (cd "$dir" && _pg_as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -o "$opts" -w -t 60 start >/dev/null); then
      tail -n 20 "$dir/postgres.log" >&2 || true
      ! tail -n 20 "$dir/postgres.log" 2>/dev/null | grep -q 'Address already in use' ||
        die "PostgreSQL could not listen on 127.0.0.1:$port: the port is in use${3:+ (set $3 to a free one)}."
      die "PostgreSQL did not start in $dir on port $port$named (see $dir/postgres.log)."
    fi
    PG_STARTED=1
  fi
  local isready=pg_isready
  [[ -x $bin/pg_isready ]] && isready=$bin/pg_isready
  if command -v "$isready" >/dev/null 2>&1; then
    wait_for 30 "$isready" -q -h 127.0.0.1 -p "$port" -U postgres ||
      die "PostgreSQL in $dir does not answer on 127.0.0.1:$port$named (see $dir/postgres.log)."
  else
    wait_for 30 tcp_open 127.0.0.1 "$port" || die "PostgreSQL in $dir does not answer on 127.0.0.1:$port$named."
  fi
}

pg_stop_cluster() {
  local dir=$1 bin
  [[ -f $dir/data/PG_VERSION ]] || return 0
  bin=$(pg_bin_dir) || return 0
  if (cd "$dir" && _pg_as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1); then
    log "stopping PostgreSQL in $dir"
    (cd "$dir" && _pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null) || true
  fi
}

pg_start_standby() {
  local primary_port=$1 name=$2 dir port=$4 bin
  dir=$(mkdir -p "$3" && cd "$3" && pwd)
  _pg_check_name "$name"
  bin=$(pg_bin_dir) || die "PostgreSQL server binaries were not found: run scripts/ensure-tools.sh or set DATABASE_URL."
  _pg_prepare_dir "$dir"
  if [[ ! -f $dir/data/PG_VERSION ]]; then
    # The slot keeps on the primary the WAL the standby has not received yet (a standby restarting, or slow).
    _pg_sql "postgresql://postgres@127.0.0.1:$primary_port/postgres" \
      "SELECT pg_create_physical_replication_slot('$name') WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$name')" >/dev/null
    log "copying the primary on port $primary_port into $dir/data (pg_basebackup)"
    (cd "$dir" && _pg_as_owner "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/data" \
      --wal-method=stream --slot="$name" --write-recovery-conf --checkpoint=fast >"$dir/basebackup.log" 2>&1) ||
      { cat "$dir/basebackup.log" >&2; die "pg_basebackup from port $primary_port into $dir/data failed"; }
    # What the primary's synchronous_standby_names names: the walreceiver's application_name (the last setting wins).
    printf "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres application_name=%s'\n" "$primary_port" "$name" |
      _pg_as_owner tee -a "$dir/data/postgresql.auto.conf" >/dev/null
  fi
  pg_start_cluster "$dir" "$port"
}

# Set after the standby's copy was taken: a promoted standby that named a synchronous standby of its own (none)
# would wait for it at every commit.
pg_require_synchronous_standby() {
  local url=$1 name=$2
  _pg_check_name "$name"
  # ALTER SYSTEM runs outside a transaction: one statement per call.
  _pg_sql "$url" "ALTER SYSTEM SET synchronous_standby_names = '\"$name\"'" >/dev/null
  _pg_sql "$url" "ALTER SYSTEM SET synchronous_commit = 'on'" >/dev/null
  _pg_sql "$url" "SELECT pg_reload_conf()" >/dev/null
  wait_for 60 _pg_in_sync "$url" "$name" || die "standby $name does not stream in sync with its primary"
}

_pg_in_sync() {
  [[ $(_pg_sql "$1" "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$2'") == sync ]]
}

pg_promote() {
  local dir=$1 bin
  bin=$(pg_bin_dir) || die "PostgreSQL server binaries were not found: run scripts/ensure-tools.sh"
  log "promoting the standby in $dir"
  (cd "$dir" && _pg_as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null) || die "the standby in $dir was not promoted (see $dir/postgres.log)"
}

pg_url_with_db() {
  local url=$1 name=$2
  [[ $url =~ ^(postgres(ql)?://[^/?]*)(/[^?]*)?(\?.*)?$ ]] ||
    die "DATABASE_URL must look like postgresql://user[:password]@host[:port]/database, got: $url"
  printf '%s/%s%s\n' "${BASH_REMATCH[1]}" "$name" "${BASH_REMATCH[4]}"
}

_pg_check_name() {
  [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]{0,62}$ ]] || die "invalid database name: $1"
}

# Run one SQL statement against the server's maintenance database `postgres`:
# with psql when installed, otherwise with the `pg` driver from node_modules.
_pg_sql() {
  local url sql=$2
  url=$(pg_url_with_db "$1" postgres)
  if command -v psql >/dev/null 2>&1; then
    psql "$url" -X -q -t -A -v ON_ERROR_STOP=1 -c "$sql" </dev/null
  else
    (cd "$PROJECT_ROOT" && PG_URL=$url PG_SQL=$sql node -e '
      const { Client } = require("pg");
      const c = new Client({ connectionString: process.env.PG_URL });
      c.connect().then(() => c.query(process.env.PG_SQL))
        .then(r => { for (const row of r.rows || []) console.log(Object.values(row).join("|")); return c.end(); })
        .catch(e => { console.error(e.message); process.exit(1); });')
  fi
}

pg_create_database() {
  local url=$1 name=$2
  _pg_check_name "$name"
  if [[ $(_pg_sql "$url" "SELECT 1 FROM pg_database WHERE datname = '$name'") != 1 ]]; then
    log "creating database $name"
    _pg_sql "$url" "CREATE DATABASE \"$name\"" >/dev/null
  fi
}

pg_drop_database() {
  local url=$1 name=$2
  _pg_check_name "$name"
  log "dropping database $name"
  _pg_sql "$url" "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null
}

# Throwaway database for a test or benchmark run: on the server of DATABASE_URL when it is set
# (database test_<random>), else in a temporary cluster on a free port, without fsync unless PG_FAST
# is set and empty (the benchmarks' durable cluster). Exports DATABASE_URL;
# call pg_throwaway_cleanup from the caller's EXIT trap.
PG_THROWAWAY_BASE='' PG_THROWAWAY_NAME='' PG_THROWAWAY_DIR=''
pg_throwaway_database() {
  if [[ -n ${DATABASE_URL:-} ]]; then
    PG_THROWAWAY_BASE=$DATABASE_URL
    local name
    name=test_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
    pg_create_database "$PG_THROWAWAY_BASE" "$name"
    PG_THROWAWAY_NAME=$name
    DATABASE_URL=$(pg_url_with_db "$PG_THROWAWAY_BASE" "$name")
  else
    PG_THROWAWAY_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-pg.XXXXXX")
    local port
    port=$(free_port)
    PG_FAST=${PG_FAST-1} pg_start_cluster "$PG_THROWAWAY_DIR" "$port"
    pg_create_database "postgresql://postgres@127.0.0.1:$port/postgres" test
    DATABASE_URL="postgresql://postgres@127.0.0.1:$port/test"
  fi
  export DATABASE_URL
}

pg_throwaway_cleanup() {
  if [[ -n $PG_THROWAWAY_NAME ]]; then
    # With the databases each test process made beside it, its own and its Temporal cluster's (test/support/environment.ts).
    local name
    for name in $PG_THROWAWAY_NAME $(_pg_sql "$PG_THROWAWAY_BASE" "SELECT datname FROM pg_database WHERE starts_with(datname, '${PG_THROWAWAY_NAME}_')" || true); do
      pg_drop_database "$PG_THROWAWAY_BASE" "$name" || true
    done
  fi
  if [[ -n $PG_THROWAWAY_DIR ]]; then
    pg_stop_cluster "$PG_THROWAWAY_DIR" || true
    rm -rf "$PG_THROWAWAY_DIR"
  fi
}
