import type { ChainId } from '../../../catalogue/service';
import { bitcoinRules } from './bitcoin';
import { ethereumRules } from './ethereum';
import { solanaRules } from './solana';
import { tronRules } from './tron';
import type { ChainRules } from './types';

/** Each devnet chain's rules; a chain without an entry has no devnet. */
export const DEVNET_RULES: Partial<Record<ChainId, ChainRules>> = {
  bitcoin: bitcoinRules,
  ethereum: ethereumRules,
  tron: tronRules,
  solana: solanaRules,
};

/** The chains the devnet runs. */
export const DEVNET_CHAINS = Object.keys(DEVNET_RULES) as ChainId[];
