# shellcheck shell=bash
# LNbits, the peer the lightning-invoices benchmark measures us against. Source it after lib.sh; it
# defines functions and changes no shell options of its own.
#
#   lnbits_install install LNbits into .tools/lnbits when missing (scripts/ensure-tools.sh calls it); it
#                  says why and returns 1 when it cannot (no python3, or pip failed).
#   lnbits_start   install LNbits into .tools/lnbits when missing, start it on 127.0.0.1 (FakeWallet
#                  funding source, SQLite in a temporary folder), wait until it is healthy, create a
#                  wallet and export LNBITS_URL and LNBITS_INVOICE_KEY. On any failure it says why,
#                  leaves nothing running and returns 1, so the caller can skip the peer.
#   lnbits_stop    stop the server lnbits_start started and remove its data; safe to call twice.

LNBITS_VERSION=1.6.2
# bolt11 (an LNbits dependency) imports bitstring's ConstBitStream, which bitstring 5 removed.
LNBITS_BITSTRING_VERSION=4.4.0
LNBITS_VENV="$TOOLS_DIR/lnbits"

LNBITS_PID=
LNBITS_DIR=

lnbits_install() {
  pip_venv_install "$LNBITS_VENV" "$LNBITS_VERSION" "lnbits==$LNBITS_VERSION" "bitstring==$LNBITS_BITSTRING_VERSION"
}

lnbits_start() {
  if ! lnbits_install; then
    log "LNbits $LNBITS_VERSION could not be installed from PyPI here"
    return 1
  fi
  LNBITS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/custody-bench-lnbits.XXXXXX")
  mkdir -p "$LNBITS_DIR/data/logs"
  local port site
  port=$(free_port)
  # LNbits mounts its static files from the relative path lnbits/static: it runs from its site-packages.
  # (Found without importing lnbits, whose settings module writes a key file into ./data on import.)
  site=$("$LNBITS_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [[ -d $site/lnbits ]] || { log "LNbits is not in $site"; lnbits_stop; return 1; }
  log "starting LNbits $LNBITS_VERSION on 127.0.0.1:$port (FakeWallet, SQLite in $LNBITS_DIR)"
  # uvicorn serves LNbits' app directly, as its `lnbits` command does in a child process, so the one pid
  # is the server. Settings come from the environment only (no admin UI); rate limit lifted as ours is in
  # the benchmark; no access log (ours runs silent); manifests, price aggregator and exchange-rate
  # providers emptied so it never reaches beyond loopback. Wallets account in sats: with a fiat currency
  # and no price source every invoice would log a failed conversion, which its cached price avoids in use.
  (
    cd "$site" && exec env \
      LNBITS_ADMIN_UI=false \
      LNBITS_BACKEND_WALLET_CLASS=FakeWallet \
      LNBITS_DATA_FOLDER="$LNBITS_DIR/data" \
      LNBITS_EXTENSIONS_PATH="$LNBITS_DIR" \
      HOST=127.0.0.1 PORT="$port" \
      LNBITS_RATE_LIMIT_NO=1000000000 LNBITS_RATE_LIMIT_UNIT=second \
      LNBITS_EXTENSIONS_MANIFESTS='[]' LNBITS_WASM_EXTENSIONS_MANIFESTS='[]' \
      LNBITS_DEFAULT_ACCOUNTING_CURRENCY=sat \
      LNBITS_PRICE_AGGREGATOR_ENABLED=false LNBITS_PRICE_AGGREGATOR_URL='' LNBITS_EXCHANGE_RATE_PROVIDERS='[]' \
      "$LNBITS_VENV/bin/python" -m uvicorn lnbits.__main__:app --host 127.0.0.1 --port "$port" --loop uvloop --no-access-log
  ) >"$LNBITS_DIR/lnbits.log" 2>&1 </dev/null &
  LNBITS_PID=$!
  local url="http://127.0.0.1:$port" deadline=$((SECONDS + 90))
  until curl -sf "$url/api/v1/health" >/dev/null 2>&1; do
    if ! kill -0 "$LNBITS_PID" 2>/dev/null || ((SECONDS >= deadline)); then
      tail -n 20 "$LNBITS_DIR/lnbits.log" >&2 || true
      log "LNbits did not become healthy"
      lnbits_stop
      return 1
    fi
    sleep 0.5
  done
  local wallet key
  wallet=$(curl -sf -X POST "$url/api/v1/account" -H 'content-type: application/json' -d '{"name":"Benchmark"}') &&
    key=$(node -e 'process.stdout.write(JSON.parse(process.argv[1]).inkey)' "$wallet") && [[ -n $key ]] ||
    { log "LNbits did not create a wallet: ${wallet:-no answer}"; lnbits_stop; return 1; }
  export LNBITS_URL=$url LNBITS_INVOICE_KEY=$key
  log "LNbits is up (pid $LNBITS_PID), wallet created"
}

lnbits_stop() {
  if [[ -n ${LNBITS_PID:-} ]]; then
    log "stopping LNbits (pid $LNBITS_PID)"
    stop_pid "$LNBITS_PID" 20
    LNBITS_PID=
  fi
  [[ -z ${LNBITS_DIR:-} ]] || rm -rf "$LNBITS_DIR"
  LNBITS_DIR=
  unset LNBITS_URL LNBITS_INVOICE_KEY
}
