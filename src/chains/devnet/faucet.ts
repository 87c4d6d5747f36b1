import type { EntityManager } from '@mikro-orm/postgresql';
import { sandboxAddress } from '../addresses';
import type { ChainId } from '../../catalogue/service';
import { TransactionRejectedError } from '../provider';
import { DevnetOutput } from './entities';
import { acceptLocked, devnetFeeMarket, faucetAddress, pendingNonce, rulesFor, underChainLock } from './ledger';
import { DEVNET_ETHEREUM_CHAIN_ID, DEVNET_TOKENS, faucetPrivateKey } from './params';
import { DevnetRejection, type FaucetTransferInput } from './rules/types';

/** Virtual bytes a faucet transaction takes per input and besides its inputs: enough to pick the outputs it spends. */
const INPUT_VBYTES = 68n;
const OVERHEAD_VBYTES = 120n;

export interface FaucetTransfer {
  to: string;
  /** A catalogue asset id of the chain (`ETH`, `USDC_ETH`, `BTC`...). */
  assetId: string;
  /** Base units. */
  amount: bigint;
}

/**
 * Sends `amount` of `assetId` from the devnet's faucet to `to`: a real transaction built and signed
 * with the faucet key, accepted into the mempool like any broadcast and mined by the next block.
 * `position` is the transfer's position as block() will report it (`out:<vout>`, `native`, `log:<n>`
 * counted within the transaction, `ix:<n>`). Throws TransactionRejectedError (a bad address, say).
 */
export function fundFromFaucet(em: EntityManager, chain: ChainId, transfer: FaucetTransfer): Promise<{ txid: string; position: string }> {
  const rules = rulesFor(chain);
  return underChainLock(em, chain, async (tx) => {
    const market = await devnetFeeMarket(tx, chain);
    const faucet = faucetAddress(chain);
    const input: FaucetTransferInput = {
      privateKey: faucetPrivateKey(chain),
      to: transfer.to,
      assetId: transfer.assetId,
      amount: transfer.amount,
      tokens: DEVNET_TOKENS[chain],
      feeRate: market.model === 'eip1559' ? market.priorityFeePerGas.medium : market.model === 'per_byte' ? market.satPerVbyte.medium : market.transferFee.medium,
    };
    if (market.model === 'eip1559') Object.assign(input, { baseFee: market.baseFeePerGas, chainId: DEVNET_ETHEREUM_CHAIN_ID, nonce: await pendingNonce(tx, chain, faucet) });
    if (rules.buildCoinbase) input.utxos = await faucetOutputs(tx, chain, faucet, transfer.amount, input.feeRate);
    let raw: string;
    try {
      raw = rules.buildFaucetTransfer(input);
    } catch (error) {
      if (error instanceof DevnetRejection) throw new TransactionRejectedError(error.reason, error.message);
      throw error;
    }
    const accepted = await acceptLocked(tx, chain, raw);
    const to = sandboxAddress(chain, transfer.to);
    const made = accepted.transfers.find((candidate) => candidate.to === to && candidate.assetId === transfer.assetId && candidate.amount === transfer.amount);
    if (!made) throw new Error(`the faucet transaction ${accepted.txid} does not pay ${transfer.amount} ${transfer.assetId} to ${to}`);
    return { txid: accepted.txid, position: made.position };
  });
}

/** The faucet's unspent outputs, largest first, until they cover the amount and a fee for that many inputs. */
async function faucetOutputs(tx: EntityManager, chain: ChainId, faucet: string, amount: bigint, feeRate: bigint) {
  const unspent = await tx.find(DevnetOutput, { chain, address: faucet, spentBy: null }, { orderBy: { amount: 'desc' } });
  const chosen: DevnetOutput[] = [];
  let total = 0n;
  for (const output of unspent) {
    if (total >= amount + (OVERHEAD_VBYTES + INPUT_VBYTES * BigInt(chosen.length)) * feeRate) break;
    chosen.push(output);
    total += BigInt(output.amount);
  }
  return chosen.map((output) => ({ txid: output.txid, vout: output.vout, script: output.script, amount: BigInt(output.amount) }));
}
