import path from 'node:path';
import { z } from 'zod';
import { ASSETS } from './catalogue/service';
import { checkKeyCustodySettings, KeyCustodySettings } from './keys/settings';
import { checkLivePriceSettings, LivePriceSettings } from './catalogue/price-settings';
import { nodeUrl } from './shared/setting-values';
import { DatabaseUrlError, parseDatabaseUrl } from './db/database-url';

/** `ASSET_ID=0xcontract,...`: the ERC-20 contract of each token asset on a node's network. */
const tokenContracts = z
  .string()
  .regex(/^([A-Z0-9_]+=0x[0-9a-fA-F]{40})(,[A-Z0-9_]+=0x[0-9a-fA-F]{40})*$/, 'must be ASSET_ID=0x<40 hex>[,ASSET_ID=0x<40 hex>...]')
  .transform((value) => Object.fromEntries(value.split(',').map((pair) => pair.split('=') as [string, `0x${string}`])));
/** `ASSET_ID=mint,...`: the SPL mint (base58) of each token asset on a Solana node's network. */
const tokenMints = z
  .string()
  .regex(/^([A-Z0-9_]+=[1-9A-HJ-NP-Za-km-z]{32,44})(,[A-Z0-9_]+=[1-9A-HJ-NP-Za-km-z]{32,44})*$/, 'must be ASSET_ID=<base58 mint>[,ASSET_ID=<base58 mint>...]')
  .transform((value) => Object.fromEntries(value.split(',').map((pair) => pair.split('=') as [string, string])));
/** `KEY=decimal,...`: an exact decimal per catalogue asset id (a USD price, a cap) or per currency code (a rate). */
const priceTable = z
  .string()
  .regex(/^([A-Z0-9_]+=(0|[1-9]\d*)(\.\d+)?)(,[A-Z0-9_]+=(0|[1-9]\d*)(\.\d+)?)*$/, 'must be ASSET_ID=<decimal>[,ASSET_ID=<decimal>...]')
  .transform((value) => Object.fromEntries(value.split(',').map((pair) => pair.split('=') as [string, string])));
/** A non-negative decimal with at most `decimals` places: an amount in a coin's display units or a fee unit. */
const decimalSetting = (decimals: number) =>
  z.string().regex(new RegExp(`^(0|[1-9]\\d{0,29})${decimals > 0 ? `(\\.\\d{1,${decimals}})?` : ''}$`), `must be a decimal with at most ${decimals} decimal places`);
/**
 * What `POST /v1/sandbox/deposits` may send of each asset (display units, docs/devnet.md): per request
 * and per organization in any 24 hours. A configured table names the assets it changes; the others keep these.
 */
const SANDBOX_DEPOSIT_MAX_PER_REQUEST_DEFAULTS = { BTC: '10', ETH: '100', TRX: '1000000', SOL: '1000', USDC_ETH: '1000000', USDT_ETH: '1000000', USDT_TRX: '1000000', USDC_SOL: '1000000' };
const SANDBOX_DEPOSIT_MAX_PER_DAY_DEFAULTS = { BTC: '100', ETH: '1000', TRX: '10000000', SOL: '10000', USDC_ETH: '10000000', USDT_ETH: '10000000', USDT_TRX: '10000000', USDC_SOL: '10000000' };
/** A cap per catalogue asset, each within its asset's decimals, over `defaults`. */
const assetCaps = (defaults: Record<string, string>) =>
  priceTable
    .optional()
    .transform((table): Record<string, string> => ({ ...defaults, ...table }))
    .refine(
      (table) => Object.entries(table).every(([id, cap]) => ASSETS.some((asset) => asset.id === id && (cap.split('.')[1]?.length ?? 0) <= asset.decimals)),
      'must name catalogue asset ids, each amount within its asset\'s decimals',
    );
const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** Every environment variable the service reads; `.env.example` mirrors this list. */
export const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  /** Set by `npm start` for the API it starts, which answers it at GET /healthz: how the script knows the API on PORT is its own. */
  INSTANCE_ID: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'INSTANCE_ID must be 1 to 64 letters, digits, _ or -').optional(),
  PUBLIC_BASE_URL: z.string().url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: z
    .string({ error: 'DATABASE_URL is required (npm start sets it for the embedded PostgreSQL)' })
    // libpq's URI, several hosts included (src/db/database-url.ts); the message never repeats the URL (its password).
    .superRefine((value, context) => {
      try {
        parseDatabaseUrl(value);
      } catch (error) {
        if (!(error instanceof DatabaseUrlError)) throw error;
        context.addIssue({ code: 'custom', message: error.message });
      }
    }),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  TEMPORAL_ADDRESS: z.string().min(1).default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('custody-platform'),
  /**
   * Set the custom search attributes on started workflows (and register them at worker start); off only where the
   * server lacks them and cannot take them (the time-skipping test server).
   */
  TEMPORAL_SEARCH_ATTRIBUTES: bool.default(true),
  /** A Temporal Cloud (or cluster) API key: sent as a bearer token over TLS. A secret: never logged. */
  TEMPORAL_API_KEY: z.string().min(1).optional(),
  /** TLS to Temporal; implied by an API key or a client certificate. */
  TEMPORAL_TLS: bool.optional(),
  /** mTLS: PEM files of the client certificate and its key (both or neither). */
  TEMPORAL_TLS_CERT_PATH: z.string().min(1).optional(),
  TEMPORAL_TLS_KEY_PATH: z.string().min(1).optional(),
  RATE_LIMIT_PER_SECOND: z.coerce.number().positive().default(50),
  RATE_LIMIT_BURST: z.coerce.number().int().positive().default(100),
  /** Requests with a missing or invalid key, per client address (each costs a key lookup). */
  AUTH_FAILURE_RATE_LIMIT_PER_SECOND: z.coerce.number().positive().default(2),
  AUTH_FAILURE_RATE_LIMIT_BURST: z.coerce.number().int().positive().default(30),
  /** Client addresses whose failures each API process remembers; the least recently failing is forgotten first. */
  AUTH_FAILURE_RATE_LIMIT_MAX_ADDRESSES: z.coerce.number().int().positive().default(10_000),
  /**
   * Proxies in front of the API whose `X-Forwarded-For` entries are believed: the client address is the
   * entry this many places from the right. 0 (the default): the header is ignored and the address is the
   * connection's, since any client can write the header.
   */
  TRUST_PROXY: z.coerce.number().int().min(0).max(10).default(0),
  IDEMPOTENCY_RETENTION_HOURS: z.coerce.number().int().positive().default(24),
  /** How often the `lightning-invoice-expiry` Schedule expires overdue invoices (payment is refused from expires_at on regardless). */
  LIGHTNING_INVOICE_EXPIRY_SWEEP_SECONDS: z.coerce.number().int().min(1).max(3600).default(5),
  IDEMPOTENCY_LOCK_SECONDS: z.coerce.number().int().positive().default(60),
  API_KEY_LAST_USED_RESOLUTION_SECONDS: z.coerce.number().int().min(0).default(60),
  /** Key lookups cached per API process (0: every request reads its key); a change to a key evicts it everywhere at once (LISTEN/NOTIFY). */
  API_KEY_CACHE_SECONDS: z.coerce.number().int().min(0).default(60),
  API_KEY_CACHE_MAX_KEYS: z.coerce.number().int().positive().default(10_000),
  BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(1024 * 1024),
  METRICS_ENABLED: bool.default(true),
  /**
   * Sandbox webhook endpoints may use http:// or https:// to 127.0.0.1/localhost/::1 (local receivers). Off unless set,
   * since a loopback target lets a key probe the host's own ports; never applies to live keys.
   */
  WEBHOOK_ALLOW_INSECURE_LOOPBACK: bool.default(false),
  /** How long the previous signing secret still signs deliveries after a rotation. */
  WEBHOOK_SECRET_ROTATION_HOURS: z.coerce.number().min(0).max(24 * 7).default(24),
  /** Default lifetime of a policy activation request when the request names none. */
  POLICY_ACTIVATION_EXPIRY_HOURS: z.coerce.number().int().min(1).max(720).default(72),
  /**
   * Per-organization caps, each per environment (docs/limits.md): one more at the cap is 409
   * `limit_reached`. What is deleted, revoked or archived does not count.
   */
  MAX_API_KEYS: z.coerce.number().int().min(1).default(100),
  MAX_WEBHOOK_ENDPOINTS: z.coerce.number().int().min(1).default(20),
  MAX_SUBSCRIPTIONS: z.coerce.number().int().min(1).default(50),
  MAX_CONSOLIDATION_RULES: z.coerce.number().int().min(1).default(100),
  /** Of those, the ones on a schedule: each tick reads every address of the rule's vault on its chain. */
  MAX_SCHEDULED_CONSOLIDATION_RULES: z.coerce.number().int().min(1).default(20),
  /** The shortest time between two ticks a new schedule_cron may have (a smaller one: 400 `schedule_too_frequent`). */
  CONSOLIDATION_SCHEDULE_MIN_INTERVAL_MINUTES: z.coerce.number().int().min(1).max(60).default(15),
  MAX_POLICIES: z.coerce.number().int().min(1).default(50),
  MAX_POLICY_RULES: z.coerce.number().int().min(1).default(100),
  /** Issuer BIN (6-8 digits) the sandbox issuer mints card numbers from. */
  CARD_BIN: z.string().regex(/^\d{6,8}$/, 'CARD_BIN must be 6 to 8 digits').default('489537'),
  /** Card funding fee in basis points of the amount (fund and withdraw), charged to the company balance. */
  CARD_FUNDING_FEE_BPS: z.coerce.number().int().min(0).max(10_000).default(0),
  /**
   * The live card issuer, Stripe Issuing (docs/cards.md): the secret or restricted key (`sk_live_...` / `rk_live_...`;
   * `sk_test_...` / `rk_test_...` only with STRIPE_ISSUING_MODE=test), or a file holding it; the signing secret of the
   * real-time authorization endpoint (`whsec_...`, Issuing settings), and the signing secret of the event endpoint
   * (`whsec_...`, the event destination), each directly or from a file: Stripe gives each endpoint its own. Live cards need
   * all three; without them a live card creation answers 503 `card_issuer_unavailable`. Secrets: never logged.
   */
  STRIPE_ISSUING_SECRET_KEY: z.string().min(1).optional(),
  STRIPE_ISSUING_SECRET_KEY_FILE: z.string().min(1).optional(),
  STRIPE_ISSUING_AUTHORIZATION_SECRET: z.string().min(1).optional(),
  STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE: z.string().min(1).optional(),
  STRIPE_ISSUING_WEBHOOK_SECRET: z.string().min(1).optional(),
  STRIPE_ISSUING_WEBHOOK_SECRET_FILE: z.string().min(1).optional(),
  /**
   * The Stripe mode live cards run in: `live` (the default, and the only one in production) takes live keys and
   * events with `livemode: true` only; `test` (staging, stripe-mock) takes test keys and test-mode events only.
   */
  STRIPE_ISSUING_MODE: z.enum(['live', 'test']).default('live'),
  /**
   * Whether the Issuing program is backed by Celtic Bank (Stripe says which in the Issuing settings): each live cardholder
   * must then have accepted Celtic's Authorized User Terms, given as `customer.terms_acceptance` of POST /api/cards
   * and sent to Stripe as the cardholder's `individual.card_issuing.user_terms_acceptance`; a live card without it is 400.
   */
  STRIPE_ISSUING_CELTIC_TERMS: bool.default(false),
  /**
   * How long the real-time authorization decision may take, in ms: the wait for a pooled database connection, then
   * the card's row lock and each statement within what is left (PostgreSQL `lock_timeout`, `statement_timeout`). Past
   * it the purchase is declined (counted in `stripe_issuing_authorization_timeouts_total`), well before Stripe's
   * 2-second deadline applies its own default.
   */
  STRIPE_ISSUING_DECISION_TIMEOUT_MS: z.coerce.number().int().min(50).max(1_500).default(800),
  /** How often the `stripe-issuing-reconciliation` Schedule compares Stripe's open authorizations and Issuing balance with the live cards (docs/cards.md). */
  STRIPE_ISSUING_RECONCILIATION_INTERVAL_SECONDS: z.coerce.number().int().min(60).max(86_400).default(900),
  /** Where the Stripe SDK sends its requests (default api.stripe.com over https): stripe-mock in tests. */
  STRIPE_API_HOST: z.string().min(1).optional(),
  STRIPE_API_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  STRIPE_API_PROTOCOL: z.enum(['http', 'https']).optional(),
  /**
   * Chain nodes, one JSON-RPC URL per chain and environment (docs/chains.md). A live node must be
   * Ethereum mainnet (chain id 1); a sandbox node may be any other network, and is held to
   * CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID when that is set (31337 for anvil).
   */
  CHAIN_NODE_ETHEREUM_SANDBOX: nodeUrl.optional(),
  CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: z.coerce.number().int().positive().optional(),
  CHAIN_NODE_ETHEREUM_LIVE: nodeUrl.optional(),
  /** Token contracts the Ethereum nodes are scanned for; live defaults to Circle's USDC and Tether's USDT on mainnet. */
  CHAIN_TOKENS_ETHEREUM_SANDBOX: tokenContracts.optional(),
  CHAIN_TOKENS_ETHEREUM_LIVE: tokenContracts.prefault('USDC_ETH=0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48,USDT_ETH=0xdAC17F958D2ee523a2206206994597C13D831ec7'),
  /**
   * Bitcoin nodes (Bitcoin Core or btcd), one RPC URL per environment; `rpcuser:rpcpass` go in the URL's
   * userinfo. A live node must serve mainnet; a sandbox node any other network, and the one
   * CHAIN_NODE_BITCOIN_SANDBOX_NETWORK names when set.
   */
  CHAIN_NODE_BITCOIN_SANDBOX: nodeUrl.optional(),
  CHAIN_NODE_BITCOIN_SANDBOX_NETWORK: z.enum(['regtest', 'simnet', 'testnet', 'testnet4', 'signet']).optional(),
  CHAIN_NODE_BITCOIN_LIVE: nodeUrl.optional(),
  /**
   * Solana nodes (any Solana JSON-RPC: Agave, a hosted provider), one URL per environment. A live node must
   * serve mainnet-beta (its genesis hash); a sandbox node any other cluster. Unset sandbox: the devnet.
   */
  CHAIN_NODE_SOLANA_SANDBOX: nodeUrl.optional(),
  CHAIN_NODE_SOLANA_LIVE: nodeUrl.optional(),
  /** The SPL mints the Solana nodes are scanned for and sent from; live defaults to Circle's USDC on mainnet-beta. */
  CHAIN_TOKENS_SOLANA_SANDBOX: tokenMints.optional(),
  CHAIN_TOKENS_SOLANA_LIVE: tokenMints.prefault('USDC_SOL=EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'),
  /**
   * How many Solana blocks scanning reads at once ahead of its cursor (processed one by one, in order):
   * mainnet makes a slot every 400 ms, more than one getBlock round trip at a time can follow
   * (bench/solana-scan.ts). Each read holds up to CHAIN_NODE_MAX_RESPONSE_BYTES while it arrives.
   */
  SOLANA_SCAN_PARALLEL_BLOCKS: z.coerce.number().int().min(1).max(64).default(4),
  /** Blocks on top of (and including) the one carrying an incoming transfer before it is available. */
  CHAIN_CONFIRMATIONS_BITCOIN: z.coerce.number().int().min(1).max(1000).default(3),
  CHAIN_CONFIRMATIONS_ETHEREUM: z.coerce.number().int().min(1).max(1000).default(12),
  CHAIN_CONFIRMATIONS_TRON: z.coerce.number().int().min(1).max(1000).default(19),
  CHAIN_CONFIRMATIONS_SOLANA: z.coerce.number().int().min(1).max(1000).default(32),
  /**
   * A fee the caller gives (Bitcoin `fee_rate`) above this many times the market's high level is refused,
   * 400 `fee_above_market`, unless the request states its own ceiling (`max_fee_rate`). docs/transactions.md.
   */
  FEE_MARKET_MAX_MULTIPLE: z.coerce.number().int().min(1).max(1000).default(3),
  /**
   * An Ethereum or Bitcoin send still unmined this many blocks after it (or its latest replacement) was seen
   * waiting is replaced at a higher fee by its workflow; 0 turns automatic bumps off. docs/transactions.md.
   */
  FEE_BUMP_AFTER_BLOCKS: z.coerce.number().int().min(0).max(100_000).default(12),
  /**
   * How often a send, and a gas station's sponsorship, is checked against the node during its first 60 checks (then
   * every 30 s). Each workflow takes the value it was started with. docs/transactions.md.
   */
  CHAIN_CHECK_SECONDS: z.coerce.number().int().min(1).max(60).default(5),
  /** The fee cap of automatic bumps: never a fee limit above this many times the one the send was accepted with. */
  FEE_BUMP_MAX_MULTIPLE: z.coerce.number().int().min(1).max(1000).default(3),
  /** How often block scanning asks each chain's node for new blocks once it has caught up. */
  CHAIN_SCAN_INTERVAL_SECONDS: z.coerce.number().min(0.1).max(3600).default(5),
  /**
   * How often the ledger reconciliation of each chain and environment compares every custody address
   * with its node at the scanner's block (a Temporal Schedule each); a difference is raised when found (docs/monitoring.md).
   */
  LEDGER_RECONCILIATION_INTERVAL_SECONDS: z.coerce.number().int().min(10).max(86_400).default(600),
  /** How often the `ledger-invariant-check` Schedule proves the double-entry ledger whole (docs/ledger.md). */
  LEDGER_INVARIANT_CHECK_INTERVAL_SECONDS: z.coerce.number().int().min(10).max(86_400).default(300),
  /** Holders (addresses; wallets on Bitcoin) the reconciliation compares per page: one activity, its node reads batched. */
  LEDGER_RECONCILIATION_HOLDERS_PER_PAGE: z.coerce.number().int().min(1).max(5000).default(200),
  /**
   * An ERC-20 send's gas limit: the node's eth_estimateGas of the transfer raised by this margin, in
   * percent (a token's gas can change between the estimate and the block), and never above the cap; an
   * estimate above the cap refuses the send (docs/transactions.md).
   */
  ERC20_GAS_MARGIN_PERCENT: z.coerce.number().int().min(0).max(100).default(20),
  ERC20_GAS_CAP: z.coerce.number().int().min(21_000).max(30_000_000).default(200_000),
  /**
   * The LND node of each environment, over its REST API (docs/lightning.md): the URL, the macaroon's file (a
   * secret, never logged; live refuses one granting more than the service uses, so bake one with
   * `lnd:bake-macaroon`) and the TLS certificate LND serves, both files read again when they change. All three or none. Without
   * one, sandbox invoices are signed with the sandbox node key and pay the sandbox network; live Lightning
   * answers 503 lightning_node_unavailable. The sandbox node's chain (its invoices' prefix): testnet unless set.
   */
  LIGHTNING_LND_SANDBOX_REST_URL: z.url({ protocol: /^https$/, error: 'must be an https:// URL' }).optional(),
  LIGHTNING_LND_SANDBOX_MACAROON_PATH: z.string().min(1).optional(),
  LIGHTNING_LND_SANDBOX_TLS_CERT_PATH: z.string().min(1).optional(),
  LIGHTNING_LND_SANDBOX_NETWORK: z.enum(['testnet', 'signet', 'regtest']).default('testnet'),
  LIGHTNING_LND_LIVE_REST_URL: z.url({ protocol: /^https$/, error: 'must be an https:// URL' }).optional(),
  LIGHTNING_LND_LIVE_MACAROON_PATH: z.string().min(1).optional(),
  LIGHTNING_LND_LIVE_TLS_CERT_PATH: z.string().min(1).optional(),
  // mainnet in production; a staging deployment's live node may run elsewhere (the node's own network must then agree).
  LIGHTNING_LND_LIVE_NETWORK: z.enum(['mainnet', 'testnet', 'signet', 'regtest']).default('mainnet'),
  /**
   * The fee limit of an LND payment given no max_fee: the larger of this floor (sats) and this share of the
   * amount (parts per million; 10,000 = 1 %), never below the route's estimate (docs/lightning.md "Paying").
   */
  LIGHTNING_LND_FEE_LIMIT_FLOOR_SATS: z.coerce.number().int().min(0).max(1_000_000).default(10),
  LIGHTNING_LND_FEE_LIMIT_PPM: z.coerce.number().int().min(0).max(1_000_000).default(10_000),
  /**
   * Attempts of a payment's send (and its re-query) that end in a transient error (node unreachable, an
   * unknown refusal) before the payment is held for an operator: still pending and re-queried, shown by
   * `lightning_payments_held` and `npm run cli -- lightning:held` (docs/lightning.md "Held payments").
   */
  LIGHTNING_LND_SEND_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(8),
  /** How long a call to a chain node may take before it counts as unreachable. */
  CHAIN_NODE_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** The most a chain node's answer may hold, bytes: past it the answer is abandoned unread (the pass-through answers -32005). */
  CHAIN_NODE_MAX_RESPONSE_BYTES: z.coerce.number().int().min(65_536).max(256 * 1024 * 1024).default(10 * 1024 * 1024),
  /** The JSON-RPC pass-through's cost budget per request: each call weighs its method's weight (src/chains/rpc-methods.ts). */
  RPC_BATCH_MAX_COST: z.coerce.number().int().min(10).max(10_000).default(100),
  /** The widest block range (inclusive) an eth_getLogs through the pass-through may ask for. */
  RPC_LOG_RANGE_MAX_BLOCKS: z.coerce.number().int().min(1).max(100_000).default(1_000),
  /** Pass-through requests one organization (per environment) may have in flight in each API process; more answer 429. */
  RPC_CONCURRENCY_PER_ORGANIZATION: z.coerce.number().int().min(1).max(1_000).default(4),
  /** Seconds between two blocks of each devnet chain (docs/devnet.md); the sandbox helper mines more on demand. */
  DEVNET_BLOCK_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(3600).default(10),
  /** Sandbox deposit caps, `ASSET_ID=amount,...` over the defaults above (docs/devnet.md). */
  SANDBOX_DEPOSIT_MAX_PER_REQUEST: assetCaps(SANDBOX_DEPOSIT_MAX_PER_REQUEST_DEFAULTS),
  SANDBOX_DEPOSIT_MAX_PER_DAY: assetCaps(SANDBOX_DEPOSIT_MAX_PER_DAY_DEFAULTS),
  /** USD prices of sandbox keys (docs/transactions.md): a fixed table. */
  PRICE_TABLE_SANDBOX: priceTable.prefault('BTC=65000,ETH=3000,TRX=0.12,SOL=150,USDC_ETH=1,USDT_ETH=1,USDT_TRX=1,USDC_SOL=1'),
  ...LivePriceSettings.shape,
  /**
   * The platform's own fee sponsorship (funding model provider_sponsorship, `hedge_paymaster`): the
   * organization whose gas stations pay it, and what each organization may have sponsored per UTC day,
   * in USD. Organization unset: provider sponsorship is not configured (docs/gas-stations.md).
   */
  HEDGE_PAYMASTER_ORGANIZATION_ID: z.uuid().optional(),
  HEDGE_PAYMASTER_DAILY_BUDGET_USD: z
    .string()
    .regex(/^\d{1,12}(\.\d{1,8})?$/, 'HEDGE_PAYMASTER_DAILY_BUDGET_USD must be a decimal amount of USD')
    .default('25'),
  /**
   * How far above its need a sponsored fee may be, in percent: a client-signed transaction's gas limit
   * over the node's estimate, and its fee price over the fee market's high level (docs/gas-stations.md).
   */
  SPONSORSHIP_FEE_MARGIN_PERCENT: z.coerce.number().int().min(0).max(100).default(20),
  /**
   * What a gas station that names none may spend on sponsorship per UTC day, in the chain's native
   * coin (display units), and the most it pays per fee, in the chain's fee unit (gwei per gas, sat/vB,
   * the whole fee in sun or lamports). No station sponsors without limits (docs/gas-stations.md).
   */
  GAS_STATION_DEFAULT_DAILY_BUDGET_BITCOIN: decimalSetting(8).default('0.01'),
  GAS_STATION_DEFAULT_DAILY_BUDGET_ETHEREUM: decimalSetting(18).default('0.5'),
  GAS_STATION_DEFAULT_DAILY_BUDGET_TRON: decimalSetting(6).default('1000'),
  GAS_STATION_DEFAULT_DAILY_BUDGET_SOLANA: decimalSetting(9).default('1'),
  GAS_STATION_DEFAULT_MAX_GAS_PRICE_BITCOIN: decimalSetting(3).default('500'),
  GAS_STATION_DEFAULT_MAX_GAS_PRICE_ETHEREUM: decimalSetting(9).default('200'),
  GAS_STATION_DEFAULT_MAX_GAS_PRICE_TRON: decimalSetting(0).default('50000000'),
  GAS_STATION_DEFAULT_MAX_GAS_PRICE_SOLANA: decimalSetting(0).default('1000000'),
  /** How long a payout quote holds; its expiry is the trip's deadline for funds (docs/payouts.md). */
  PAYOUT_QUOTE_TTL_SECONDS: z.coerce.number().int().min(30).max(86_400).default(900),
  /** The sandbox rate provider's mid rates: units of each payout currency per USD, exact decimals (docs/payouts.md). */
  PAYOUT_RATE_TABLE_SANDBOX: priceTable.prefault('NGN=1550,KES=129.5,GHS=15.4,UGX=3700,TZS=2650,ZAR=18.2,XOF=605'),
  /** The spread taken off the mid rate, and the service fee taken from the amount sent, in basis points. */
  PAYOUT_SPREAD_BPS: z.coerce.number().int().min(0).max(5_000).default(150),
  PAYOUT_SERVICE_FEE_BPS: z.coerce.number().int().min(0).max(5_000).default(100),
  /** How far below the quoted amount a deposit may fall and still be paid out pro rata (rule 7), in basis points. */
  PAYOUT_UNDERPAYMENT_MARGIN_BPS: z.coerce.number().int().min(0).max(10_000).default(200),
  /** What becomes of a deposit below the margin, and of one that arrives after the trip expired or settled (rule 1). */
  PAYOUT_UNDERPAYMENT_RESOLUTION: z.enum(['refund', 'credit', 'hold']).default('hold'),
  PAYOUT_LATE_PAYMENT_RESOLUTION: z.enum(['refund', 'credit', 'hold']).default('credit'),
  /** How long a trip's workflow keeps watching its deposit address for late payments once the trip has ended. */
  PAYOUT_LATE_PAYMENT_WATCH_HOURS: z.coerce.number().int().min(0).max(24 * 90).default(168),
  /** Sends a refund may take: a send proven failed (its funds never left the desk) is replaced by a new one until this many were made. */
  PAYOUT_REFUND_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(3),
  /**
   * The organization whose custody holds the payout desk: the deposit addresses of every trip.
   * Unset: the service keeps its own desk organization, created on first use (docs/payouts.md).
   */
  PAYOUT_DESK_ORGANIZATION_ID: z.uuid().optional(),
  ...KeyCustodySettings.shape,
  /**
   * The main worker's slots and sticky workflow cache (every flow but webhook delivery). Bounded below the SDK's
   * defaults (100 activities, 40 workflow tasks, a cache sized from the V8 heap limit: about 2,300 workflows on a
   * 4 GiB heap), so the worker's memory stays flat however many workflows are open: a workflow evicted from the
   * cache is replayed from its history on its next task.
   */
  WORKER_MAX_ACTIVITIES: z.coerce.number().int().min(1).default(50),
  WORKER_MAX_WORKFLOW_TASKS: z.coerce.number().int().min(2).default(20),
  WORKER_CACHED_WORKFLOWS: z.coerce.number().int().min(0).default(500),
  /**
   * How long a workflow task waits on its worker's sticky queue before any worker may take it (SDK default 10 s). A
   * worker that crashed leaves its sticky queue unpolled: the workflows it held move on after this much (the server
   * counts it in whole seconds), unless a starting worker has released them first (src/temporal/sticky-queues.ts).
   * A busy worker that misses it costs only a replay from history.
   */
  WORKER_STICKY_QUEUE_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(500),
  /**
   * How long a request waits for a workflow to answer an Update (a sandbox mining and its scan, an approval vote)
   * or for the signer's workflow (a signature, a wallet's public keys, when the API holds no seed key):
   * with no worker to run it (down, restarting), the request answers 503 `worker_unavailable` after this.
   */
  WORKFLOW_UPDATE_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(60),
  /**
   * The webhooks worker (task queue `<TEMPORAL_TASK_QUEUE>-webhooks`, docs/webhooks.md): its slots are its own,
   * so deliveries waiting on dead endpoints never take the slots money flows need.
   */
  WEBHOOK_WORKER_MAX_ACTIVITIES: z.coerce.number().int().min(1).default(20),
  WEBHOOK_WORKER_MAX_WORKFLOW_TASKS: z.coerce.number().int().min(1).default(10),
  WEBHOOK_WORKER_CACHED_WORKFLOWS: z.coerce.number().int().min(0).default(200),
  /** Consecutive failed attempts after which an endpoint's circuit opens: one delivery probes it, the others wait. */
  WEBHOOK_CIRCUIT_FAILURES: z.coerce.number().int().min(1).default(5),
  /** An endpoint failing without a single success for this long is disabled (with a webhook_endpoint.disabled event). */
  WEBHOOK_DISABLE_AFTER_HOURS: z.coerce.number().min(1).max(24 * 90).default(72),
})
  .superRefine(checkKeyCustodySettings)
  .superRefine(checkLivePriceSettings)
  .refine((config) => (config.TEMPORAL_TLS_CERT_PATH === undefined) === (config.TEMPORAL_TLS_KEY_PATH === undefined), {
    path: ['TEMPORAL_TLS_KEY_PATH'],
    message: 'TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH go together (mTLS needs both)',
  })
  .refine((config) => config.STRIPE_ISSUING_SECRET_KEY === undefined || config.STRIPE_ISSUING_SECRET_KEY_FILE === undefined, {
    path: ['STRIPE_ISSUING_SECRET_KEY_FILE'],
    message: 'set STRIPE_ISSUING_SECRET_KEY or STRIPE_ISSUING_SECRET_KEY_FILE, not both',
  })
  .refine((config) => config.STRIPE_ISSUING_WEBHOOK_SECRET === undefined || config.STRIPE_ISSUING_WEBHOOK_SECRET_FILE === undefined, {
    path: ['STRIPE_ISSUING_WEBHOOK_SECRET_FILE'],
    message: 'set STRIPE_ISSUING_WEBHOOK_SECRET or STRIPE_ISSUING_WEBHOOK_SECRET_FILE, not both',
  })
  .refine((config) => config.STRIPE_ISSUING_AUTHORIZATION_SECRET === undefined || config.STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE === undefined, {
    path: ['STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE'],
    message: 'set STRIPE_ISSUING_AUTHORIZATION_SECRET or STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE, not both',
  })
  .refine((config) => config.NODE_ENV !== 'production' || config.STRIPE_ISSUING_MODE === 'live', {
    path: ['STRIPE_ISSUING_MODE'],
    message: 'STRIPE_ISSUING_MODE=test is refused when NODE_ENV=production: live cards take live Stripe keys only',
  })
  .superRefine((config, context) => {
    for (const environment of ['SANDBOX', 'LIVE'] as const) {
      const names = [`LIGHTNING_LND_${environment}_REST_URL`, `LIGHTNING_LND_${environment}_MACAROON_PATH`, `LIGHTNING_LND_${environment}_TLS_CERT_PATH`] as const;
      const given = names.filter((name) => config[name] !== undefined);
      if (given.length > 0 && given.length < names.length) {
        context.addIssue({ code: 'custom', path: [names.find((name) => config[name] === undefined)!], message: `${names.join(', ')} go together (LND needs all three)` });
      }
    }
  });

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment once; every bad variable is named in the error, one per line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return { ...parsed.data, DATA_DIR: path.resolve(parsed.data.DATA_DIR) };
}
