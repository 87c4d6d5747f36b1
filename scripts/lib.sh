# shellcheck shell=bash
# Shared helpers for the scripts in this folder. Source it; it defines
# functions and a few variables and changes no shell options of its own.
#
#   log MSG...               one line on stderr, prefixed with the script name
#   die MSG...               log "error: MSG" and exit 1
#   PROJECT_ROOT             absolute path of the repository root
#   free_port                print a free TCP port on 127.0.0.1
#   wait_for SECONDS CMD...  retry CMD every 0.5 s until it succeeds or time runs out
#   with_progress WHAT [--into FILE] CMD...
#                            log WHAT, run CMD (its output appended to FILE when given), say every
#                            10 s that WHAT still runs and for how long, then how long it took
#   tcp_open HOST PORT       succeed when something accepts connections there
#   http_get HOST PORT PATH  print the answer (status line, headers, body) to GET PATH; empty when nothing answers
#   port_holder PORT         print who listens on PORT ("pid 123, node dist/src/server.js"), when ss or lsof can tell
#   refuse_taken_port HOST PORT VARIABLE WHAT
#                            die, naming VARIABLE, when something already accepts connections on HOST:PORT
#   build_inputs_digest      print the digest of what `npm run build` reads (scripts/build-inputs.cjs)
#   record_build DIGEST      note in dist/ that it is the build of inputs of DIGEST (after a build that began with them)
#   build_if_changed         npm run build, unless dist/ is the build of today's inputs; records what it built
#   temporal_cli_path        print the path of the `temporal` CLI (fails if missing)
#   temporal_test_server_path  print the path of the time-skipping test server
#   btcd_path                print the path of `btcd`, the Bitcoin node the chain tests run (fails if missing)
#   stripe_mock_path         print the path of `stripe-mock`, the Stripe API the card-issuer tests run (fails if missing)
#   stripe_mock_fixtures_path  print the path of the fixtures stripe-mock bundles (its module's embedded/openapi/fixtures3.json),
#                            which tests change one object of and pass to `stripe-mock -fixtures` (fails if missing)
#   lnd_path                 print the path of `lnd`, the Lightning node of the lnd provider's tests (fails if missing)
#   temporal_server_dir      print the folder of the Temporal server build: bin/temporal-server, bin/temporal-sql-tool
#                            and schema/postgresql/v12 (fails if any is missing); scripts/temporal-cluster.sh runs it
#   temporal_dev_start DBFILE PORT UI_PORT LOGFILE [NAMESPACE]
#                            start `temporal server start-dev` in the background,
#                            sets TEMPORAL_DEV_PID, waits until it is healthy, and
#                            records its pid in DBFILE.pid
#   temporal_dev_reusable DBFILE PORT  succeed when the dev server temporal_dev_start
#                            started for DBFILE answers on PORT (reuse it), fail when
#                            nothing answers there (start one), die when another does
#   temporal_healthy ADDRESS succeed when the frontend at host:port answers
#   temporal_dev_stop        stop the dev server started by temporal_dev_start
#   stop_pid PID [SECONDS]   TERM a process, KILL it after SECONDS (default 15)
#   SERVICE_NODE_OPTIONS     the V8 options the API and the worker run with (start.sh, the benchmarks)
#   PROJECT_NODE_VERSION     the Node the project runs on where the machine's is older (PROJECT_NODE_DIR, in .tools/)
#   use_project_node         put PROJECT_NODE_DIR/bin first on PATH when it is installed (done on sourcing this file)
#   ensure_tools [--service] run scripts/ensure-tools.sh, then use_project_node (it may have just installed it)

LIB_SCRIPT_NAME=${LIB_SCRIPT_NAME:-$(basename "${BASH_SOURCE[1]:-$0}" .sh)}
PROJECT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR="$PROJECT_ROOT/.tools"
# Memory (README, "Architecture in a screen"; scripts/start.sh says why each). The Dockerfile repeats them.
SERVICE_NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=384"

# The Node the project builds, tests and runs on (README, "Two commands"). A machine's Node of 26.12 or newer is used
# as it is; where it is older, scripts/ensure-tools.sh installs this release from the npm registry's
# node-<os>-<arch> package into PROJECT_NODE_DIR, and every script puts it first on PATH: `node`, `npm` (the
# machine's npm, a node script) and every child process (process.execPath, `node` on PATH) then run on it.
PROJECT_NODE_VERSION=26.12.1
PROJECT_NODE_DIR=$TOOLS_DIR/node-v$PROJECT_NODE_VERSION
use_project_node() {
  [[ -x $PROJECT_NODE_DIR/bin/node ]] || return 0
  [[ $PATH == "$PROJECT_NODE_DIR/bin:"* ]] || export PATH="$PROJECT_NODE_DIR/bin:$PATH"
}
use_project_node
ensure_tools() {
  # `|| return`: called in a list (`… || ensure_tools`), a function's failing command does not stop it.
  bash "$PROJECT_ROOT/scripts/ensure-tools.sh" "$@" || return
  use_project_node
}

log() { printf '[%s] %s\n' "$LIB_SCRIPT_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

free_port() {
  # A port below the kernel's ephemeral range (test/support/ports.ts says why: an ephemeral one the kernel handed
  # out may be an outgoing connection's before the server binds it), and below 32768 (Temporal's membership table
  # stores ports as smallint); node is always there for this project, python3 is the fallback.
  local low port bind _
  if command -v node >/dev/null 2>&1; then
    bind=(node -e 'const s=require("net").createServer();s.once("error",()=>process.exit(1));s.listen(+process.argv[1],"127.0.0.1",()=>s.close())')
  elif command -v python3 >/dev/null 2>&1; then
    bind=(python3 -c 'import socket,sys;s=socket.socket();s.bind(("127.0.0.1",int(sys.argv[1])));s.close()')
  else
    die "need node or python3 to find a free port"
  fi
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  ((low > 11000 && low <= 32768)) || low=32768
  for _ in $(seq 1 200); do
    port=$((10000 + RANDOM % (low - 10000)))
    if "${bind[@]}" "$port" 2>/dev/null; then
      printf '%s\n' "$port"
      return 0
    fi
  done
  die "found no free port on 127.0.0.1 between 10000 and $((low - 1))"
}

wait_for() {
  local seconds=$1; shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# An install that prints nothing for minutes looks stuck: this says it is not. CMD's status is the status;
# it runs as in an `if` (a shell function's failing commands do not stop it), so give it a command.
# A ticker in the background says so; it also ends when this shell is gone (Ctrl-C), since a background
# job of a script ignores SIGINT.
with_progress() {
  local what=$1 into='' started=$SECONDS parent=$BASHPID ticker rc=0
  shift
  if [[ ${1:-} == --into ]]; then into=$2; shift 2; fi
  log "$what"
  (
    # Its nap in the background: `wait` returns on TERM at once, where a foreground sleep would hold the trap.
    local nap=''
    trap 'kill $nap 2>/dev/null; exit' TERM
    while :; do
      sleep "${PROGRESS_EVERY:-10}" &
      nap=$!
      wait "$nap"
      kill -0 "$parent" 2>/dev/null || exit
      log "  still $what ($((SECONDS - started))s)"
    done
  ) &
  ticker=$!
  if [[ -n $into ]]; then "$@" >>"$into" 2>&1 || rc=$?; else "$@" || rc=$?; fi
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if ((rc == 0)); then log "  done in $((SECONDS - started))s: $what"; else log "  failed after $((SECONDS - started))s: $what"; fi
  return "$rc"
}

tcp_open() {
  # bash's /dev/tcp needs no extra tool; the subshell closes the socket again.
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# In bash alone (curl is not everywhere); each read waits 5 s at most, so a listener that never answers ends it.
http_get() {
  (
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s:%s\r\n\r\n' "$3" "$1" "$2" >&3
    local line
    while IFS= read -r -t 5 line <&3 || [[ -n $line ]]; do printf '%s\n' "$line"; done
  ) 2>/dev/null
}

port_holder() {
  local port=$1 line
  if command -v ss >/dev/null 2>&1; then
    line=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1) || line=''
    line=${line#pid=}
  elif command -v lsof >/dev/null 2>&1; then
    line=$(lsof -nP -t -iTCP:"$port" -sTCP:LISTEN 2>/dev/null | head -n 1) || line=''
  fi
  [[ ${line:-} =~ ^[0-9]+$ ]] || return 1
  printf 'pid %s, %s\n' "$line" "$(ps -o args= -p "$line" 2>/dev/null | cut -c 1-80)"
}

# Checked before anything starts, so a clash costs no build and no half-started instance; the process that holds
# the port is named when the system says.
refuse_taken_port() {
  local host=$1 port=$2 variable=$3 what=$4 holder
  tcp_open "$host" "$port" || return 0
  holder=$(port_holder "$port") && holder=" ($holder)" || holder=''
  die "port $port ($variable, $what) is already in use on $host$holder, by another instance or program: set $variable to a free port for this one."
}

# --- Build ----------------------------------------------------------------------

BUILD_RECORD=dist/.build-inputs
build_inputs_digest() { node "$PROJECT_ROOT/scripts/build-inputs.cjs"; }
record_build() { printf '%s\n' "$1" >"$PROJECT_ROOT/$BUILD_RECORD"; }

# The digest is taken before the build starts: a file edited during the build makes the next call build again.
# `npm run build` empties dist/ first, so a failed build leaves no record.
build_if_changed() {
  local inputs
  inputs=$(build_inputs_digest) || die "could not read the build's inputs (scripts/build-inputs.cjs)."
  if [[ -f $PROJECT_ROOT/$BUILD_RECORD && $(<"$PROJECT_ROOT/$BUILD_RECORD") == "$inputs" ]]; then
    log "nothing changed since the last build (sources, tsconfig.json, package-lock.json): not building"
    return 0
  fi
  with_progress "building (npm run build)" npm run build --silent || return 1
  record_build "$inputs"
}

stop_pid() {
  local pid=$1 seconds=${2:-15} i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < seconds * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "process $pid did not stop within ${seconds}s, killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# --- Temporal ---------------------------------------------------------------

_first_executable() {
  local c
  for c in "$@"; do
    if [[ -n $c && -x $c && ! -d $c ]]; then printf '%s\n' "$c"; return 0; fi
  done
  return 1
}

# An explicit TEMPORAL_CLI_PATH / TEMPORAL_TEST_SERVER_PATH wins; then what
# ensure-tools.sh installs (pip into .tools/temporal, fallbacks into .tools/bin).
temporal_cli_path() {
  _first_executable "${TEMPORAL_CLI_PATH:-}" "$TOOLS_DIR/temporal/bin/temporal" "$TOOLS_DIR/bin/temporal"
}
temporal_test_server_path() {
  _first_executable "${TEMPORAL_TEST_SERVER_PATH:-}" "$TOOLS_DIR/temporal/bin/temporal-test-server" \
    "$TOOLS_DIR/bin/temporal-test-server"
}

temporal_healthy() {
  "$(temporal_cli_path)" operator cluster health --address "$1" 2>/dev/null | grep -q SERVING
}

TEMPORAL_DEV_PID=
temporal_dev_start() {
  local dbfile=$1 port=$2 ui_port=$3 logfile=$4 namespace=${5:-default} cli
  cli=$(temporal_cli_path) || die "the Temporal CLI is missing: run scripts/ensure-tools.sh"
  mkdir -p "$(dirname "$dbfile")" "$(dirname "$logfile")"
  # WAL with synchronous=normal: about twice the workflows per second of SQLite's defaults; the state still
  # survives a restart of the server (a power loss may lose the last transactions, as documented in the README).
  local args=(server start-dev --db-filename "$dbfile" --port "$port" --ui-port "$ui_port"
    --ip 127.0.0.1 --log-level warn --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal)
  # "default" always exists; a different namespace has to be created at launch.
  [[ $namespace == default ]] || args+=(--namespace "$namespace")
  log "starting Temporal dev server on 127.0.0.1:$port (UI $ui_port, state $dbfile, log $logfile)"
  "$cli" "${args[@]}" >>"$logfile" 2>&1 </dev/null &
  TEMPORAL_DEV_PID=$!
  local deadline=$((SECONDS + 60))
  until temporal_healthy "127.0.0.1:$port"; do
    if ! kill -0 "$TEMPORAL_DEV_PID" 2>/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      TEMPORAL_DEV_PID=
      die "the Temporal dev server exited during startup (see $logfile)"
    fi
    if ((SECONDS >= deadline)); then
      temporal_dev_stop
      die "the Temporal dev server did not become healthy within 60s (see $logfile)"
    fi
    sleep 0.5
  done
  # Who owns the server on this port: what temporal_dev_reusable checks before another start reuses it.
  printf '%s\n' "$TEMPORAL_DEV_PID" >"$dbfile.pid"
  log "Temporal dev server is up (pid $TEMPORAL_DEV_PID)"
}

# Another instance's server would run our workflows against its database, and its workers ours: only the
# server started for this state file is reused. The recorded pid alone could be a recycled one: its command
# line must name this state file and port.
temporal_dev_reusable() {
  local dbfile=$1 port=$2 pid args
  temporal_healthy "127.0.0.1:$port" || return 1
  pid=$(head -n 1 "$dbfile.pid" 2>/dev/null) || pid=''
  args=''
  [[ ! $pid =~ ^[0-9]+$ ]] || args=$(ps -o args= -p "$pid" 2>/dev/null) || args=''
  [[ " $args " == *" --db-filename $dbfile "* && " $args " == *" --port $port "* ]] && return 0
  die "a Temporal server not started for $dbfile already answers on 127.0.0.1:$port (another instance?):" \
    "set TEMPORAL_PORT and TEMPORAL_UI_PORT to free ports for this instance's own server, or TEMPORAL_ADDRESS to share that one on purpose."
}

temporal_dev_stop() {
  [[ -n ${TEMPORAL_DEV_PID:-} ]] || return 0
  log "stopping Temporal dev server (pid $TEMPORAL_DEV_PID)"
  stop_pid "$TEMPORAL_DEV_PID" 20
  TEMPORAL_DEV_PID=
}

# --- btcd ---------------------------------------------------------------------

# An explicit BTCD_PATH wins; then what ensure-tools.sh installs with `go install`.
btcd_path() {
  _first_executable "${BTCD_PATH:-}" "$TOOLS_DIR/btcd/bin/btcd"
}

# --- stripe-mock --------------------------------------------------------------

# An explicit STRIPE_MOCK_PATH wins; then what ensure-tools.sh installs with `go install`.
stripe_mock_path() {
  _first_executable "${STRIPE_MOCK_PATH:-}" "$TOOLS_DIR/stripe-mock/bin/stripe-mock"
}

# An explicit STRIPE_MOCK_FIXTURES_PATH wins; then the copy ensure-tools.sh keeps of the installed version's fixtures.
stripe_mock_fixtures_path() {
  local c
  for c in "${STRIPE_MOCK_FIXTURES_PATH:-}" "$TOOLS_DIR/stripe-mock/openapi/fixtures3.json"; do
    if [[ -n $c && -f $c && -r $c ]]; then printf '%s\n' "$c"; return 0; fi
  done
  return 1
}

# --- LND ----------------------------------------------------------------------

# An explicit LND_PATH wins; then what ensure-tools.sh builds (lncli sits next to it).
lnd_path() {
  _first_executable "${LND_PATH:-}" "$TOOLS_DIR/lnd/bin/lnd"
}

# --- Temporal server (a cluster of separate services) ---------------------------------

# An explicit TEMPORAL_SERVER_DIR wins; then what ensure-tools.sh builds.
temporal_server_dir() {
  local d
  for d in "${TEMPORAL_SERVER_DIR:-}" "$TOOLS_DIR/temporal-server"; do
    if [[ -n $d && -x $d/bin/temporal-server && -x $d/bin/temporal-sql-tool && -d $d/schema/postgresql/v12 ]]; then
      printf '%s\n' "$d"
      return 0
    fi
  done
  return 1
}

# pip_venv_install VENV MARKER PACKAGE...: a venv at VENV with the pinned PACKAGEs from PyPI, made only
# when VENV/.installed-MARKER is missing (written last: a venv without it is a broken install and is made
# again). Says why and returns 1, leaving no venv, when python3 or pip fails.
pip_venv_install() {
  local venv=$1 marker="$1/.installed-$2"
  shift 2
  [[ -f $marker ]] && return 0
  command -v python3 >/dev/null 2>&1 || { log "python3 is not installed"; return 1; }
  rm -rf "$venv"
  local out
  out=$(mktemp)
  if python3 -m venv "$venv" >"$out" 2>&1 &&
    with_progress "installing $* from PyPI into ${venv#"$PROJECT_ROOT"/}" --into "$out" \
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$@" </dev/null; then
    rm -f "$out"
    touch "$marker"
    return 0
  fi
  tail -n 20 "$out" >&2 || true
  rm -f "$out"
  rm -rf "$venv"
  return 1
}
