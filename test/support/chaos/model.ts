import path from 'node:path';
import { type Hex } from 'viem';
import { type Anvil } from '../anvil';

export const ROOT = path.resolve(__dirname, '../../../..');
/**
 * What the chaos kills, by the Temporal it runs on: a cluster (scripts/temporal-cluster.sh), where a history process and
 * the matching service are killed, or the dev server `npm start` runs, killed whole.
 */
export const TEMPORAL_MODES = ['cluster', 'dev'] as const;
export type TemporalMode = (typeof TEMPORAL_MODES)[number];
export const COMPONENTS = { cluster: ['worker', 'api', 'history', 'matching', 'postgres'], dev: ['worker', 'api', 'temporal', 'postgres'] } as const;
export type ComponentName = (typeof COMPONENTS)[TemporalMode][number];
/** The organizations of the load: each spends, pays the others over Lightning, funds cards, sends on chain and pays out. */
export const ORGANIZATIONS = ['alpha', 'bravo', 'charlie'] as const;
export type OrganizationName = (typeof ORGANIZATIONS)[number];

/** A new card's initial funding, in cents. */
export const INITIAL_CARD_FUNDING = 500;
/** Cents charged per funding, in basis points: fees are part of the money check. */
export const FUNDING_FEE_BPS = 100;
/** Blocks on top of a transfer's before it counts (anvil mines one a second here). */
export const CONFIRMATIONS = 2;
/** Confirmations of a payout trip's deposit on the Tron devnet, whose blocks the driver mines (`mineTron`). */
export const TRON_CONFIRMATIONS = 2;

/**
 * The payout trips of the load: USDT on the Tron devnet paid out to a Nigerian bank account or a
 * Kenyan M-Pesa wallet. No sandbox outcome is set, so both sandbox rails pay: a trip ends `success`.
 */
export const PAYOUT_CORRIDORS = [
  {
    quote: { fromAsset: 'USDT', chain: 'tron', toCurrency: 'NGN', country: 'NG', paymentMethod: 'bank' },
    beneficiary: { type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi' },
  },
  {
    quote: { fromAsset: 'USDT', chain: 'tron', toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' },
    beneficiary: { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA', accountName: 'Wanjiru Kamau' },
  },
] as const;

/**
 * An organization's sweeps: a vault of its own whose wallet has two addresses the load deposits ETH to, and a manual
 * consolidation rule sweeping that ETH (native, each address paying its own fee) to the organization's main wallet.
 * One sweep at a time per organization: a run plans what the chain holds, so it starts once the ledger has booked the deposits.
 */
interface SweepSource {
  ruleId: string;
  walletId: string;
  addresses: Hex[];
  busy: boolean;
  /** Deposits booked and not swept yet: the setup's, so that the first sweeps run while the kills fall. */
  booked: boolean;
}

/** Sandbox Ethereum for the run: anvil (not killed: it stands for the network), a block a second, ETH deposited from its dev account and sent to an outside address. */
export interface Chain {
  anvil: Anvil;
  outside: Hex;
  mining?: NodeJS.Timeout;
  /** Each organization's main wallet (what it sends from, where its sweeps land). */
  wallets: Partial<Record<OrganizationName, { id: string; address: Hex }>>;
  sweepSources: Partial<Record<OrganizationName, SweepSource>>;
  /** Wei the dev account sent to each wallet (by id), each mined. */
  deposited: Map<string, bigint>;
  depositing: Promise<void>;
}

/** mulberry32: a small seeded PRNG, so a run's kill schedule and load are reproduced by its seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A PostgreSQL array literal of ids (letters, digits, '-', '_', ':', '.'), for `= any(?::text[])`: the driver would spread a JS array into a list. */
export const textArray = (ids: string[]) => `{${ids.join(',')}}`;

/** A pause of `ms` (none when it is already due: a late tick, a kill whose moment has passed). */
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
