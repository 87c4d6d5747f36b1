import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import * as btc from '@scure/btc-signer';
import { hex } from '@scure/base';
import { sandboxAddress } from '../addresses';
import type { ChainId } from '../../catalogue/service';
import { DomainError } from '../../shared/errors';
import { TransactionRejectedError, type FeeMarket } from '../provider';
import { erc20TransferData } from '../transfers/ethereum';
import { signTransfer, type FeeTerms, type SigningKey, type TransferToSign } from '../transfers';
import { acceptLocked, owedByPending } from './acceptance';
import { mineBlock } from './block-production';
import { DevnetOutput, DevnetTransaction } from './entities';
import { faucetAddress, moveBalance, rulesFor, underChainLock } from './ledger';
import { devnetBalance, devnetFeeMarket, devnetTip, pendingNonce, tipBlock } from './ledger-reads';
import { BITCOIN_DUST_LIMIT, DEVNET_ETHEREUM_CHAIN_ID, DEVNET_PARAMS, DEVNET_TOKENS, faucetPrivateKey, faucetPublicKey } from './params';
import { intrinsicGas, TOKEN_TRANSFER_EXECUTION_GAS } from './rules/ethereum';

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
 * Sends `amount` of `assetId` from the devnet's faucet to `to`: a transaction built and signed by
 * signTransfer with the faucet key, at the medium fee level, accepted into the mempool like any
 * broadcast and mined by the next block; replenished first when it runs low (replenishFaucet). `position` is the transfer's position as block() will report
 * it (`out:<vout>`, `native`, `log:<n>` counted within the transaction, `ix:<n>`). Throws
 * TransactionRejectedError (a bad address, say).
 */
export function fundFromFaucet(em: EntityManager, chain: ChainId, transfer: FaucetTransfer): Promise<{ txid: string; position: string }> {
  return underChainLock(em, chain, async (tx) => {
    const faucet = faucetAddress(chain);
    const key: SigningKey = { address: faucet, publicKey: faucetPublicKey(chain), privateKey: faucetPrivateKey(chain) };
    await replenishFaucet(tx, chain, transfer.assetId, transfer.amount);
    const [market, tip] = await Promise.all([devnetFeeMarket(tx, chain), devnetTip(tx, chain)]);
    const base: Omit<TransferToSign, 'fee'> = {
      chain,
      testnet: true,
      from: faucet,
      to: transfer.to,
      assetId: transfer.assetId,
      amount: transfer.amount,
      tokenAddress: DEVNET_TOKENS[chain][transfer.assetId],
      recentBlock: { height: tip.height, hash: tip.hash, time: tip.time },
      // The faucet is not retried: every call is a new transaction.
      reference: randomUUID(),
    };
    let raw: string;
    try {
      if (market.model === 'per_byte') raw = signBitcoin(base, key, await faucetOutputs(tx, chain, faucet, transfer.amount, market.satPerVbyte.medium), market.satPerVbyte.medium);
      else {
        const nonce = market.model === 'eip1559' ? await pendingNonce(tx, chain, faucet) : undefined;
        raw = signTransfer({ ...base, fee: accountFee(base, market), ...(nonce === undefined ? {} : { ethereum: { chainId: DEVNET_ETHEREUM_CHAIN_ID, nonce } }) }, [key]).raw;
      }
    } catch (error) {
      if (error instanceof DomainError) throw new TransactionRejectedError('malformed', error.message);
      throw error;
    }
    const accepted = await acceptLocked(tx, chain, raw);
    const to = sandboxAddress(chain, transfer.to);
    const made = accepted.transfers.find((candidate) => candidate.to === to && candidate.assetId === transfer.assetId && candidate.amount === transfer.amount);
    if (!made) throw new Error(`the faucet transaction ${accepted.txid} does not pay ${transfer.amount} ${transfer.assetId} to ${to}`);
    return { txid: accepted.txid, position: made.position };
  });
}

/**
 * Keeps the faucet able to pay, whatever the sandbox takes from it (inside the chain's lock, before
 * it sends `amount` of `assetId`): when what it can still spend of that asset, or of the native one
 * for the fee, would leave less than half its genesis balance, it gets its genesis balance plus the
 * amount more. Bitcoin mines a block whose coinbase pays that on top of its subsidy (the regtest
 * way: mining to the faucet); account chains credit the faucet's balance, as a development node's
 * setBalance does. Nobody else's balance moves, so a faucet emptied by deposits is full again for the next.
 */
async function replenishFaucet(tx: EntityManager, chain: ChainId, assetId: string, amount: bigint): Promise<void> {
  const params = DEVNET_PARAMS[chain];
  const faucet = faucetAddress(chain);
  const shortfall = (assetId: string, spendable: bigint, needed: bigint): bigint => {
    const genesis = params.genesis[assetId]!;
    return spendable - needed < genesis / 2n ? genesis + needed : 0n;
  };
  if (rulesFor(chain).buildCoinbase) {
    const unspent = await tx.find(DevnetOutput, { chain, address: faucet, spentBy: null });
    const topUp = shortfall(assetId, unspent.reduce((sum, output) => sum + BigInt(output.amount), 0n), amount);
    if (topUp > 0n) await mineBlock(tx, chain, (await tipBlock(tx, chain))!, null, topUp);
    return;
  }
  const owed = owedByPending(await tx.find(DevnetTransaction, { chain, sender: faucet, status: 'mempool' }), params.nativeAssetId);
  const needs = new Map([[params.nativeAssetId, 0n], [assetId, amount]]);
  for (const [id, needed] of needs) {
    const topUp = shortfall(id, (await devnetBalance(tx, chain, faucet, id)) - (owed.get(id) ?? 0n), needed);
    if (topUp > 0n) await moveBalance(tx, chain, faucet, id, topUp);
  }
}

/**
 * Ethereum: the medium tip over twice the next base fee (still included if the next blocks are full, as
 * wallets do), the gas limit exactly what the devnet's transfer uses. Tron and Solana: the medium flat fee.
 */
function accountFee(transfer: Omit<TransferToSign, 'fee'>, market: Exclude<FeeMarket, { model: 'per_byte' }>): FeeTerms {
  if (market.model === 'flat') return { model: 'flat', fee: market.transferFee.medium };
  const token = transfer.tokenAddress !== undefined;
  const gasLimit = intrinsicGas({ data: token ? erc20TransferData(transfer.to, transfer.amount) : undefined }) + (token ? TOKEN_TRANSFER_EXECUTION_GAS : 0n);
  const tip = market.priorityFeePerGas.medium;
  return { model: 'eip1559', gasLimit, maxFeePerGas: 2n * market.baseFeePerGas + tip, maxPriorityFeePerGas: tip };
}

/**
 * Spends all of `outputs`, the change back to the faucet when it is worth more than dust; the fee is
 * `satPerVbyte` times the size, which depends on whether there is a change output: signed once with a
 * placeholder change to measure it.
 */
function signBitcoin(base: Omit<TransferToSign, 'fee'>, key: SigningKey, outputs: DevnetOutput[], satPerVbyte: bigint): string {
  const inputs = outputs.map((output) => ({ txid: output.txid, vout: output.vout, amount: BigInt(output.amount), address: key.address, key: 0 }));
  const total = inputs.reduce((sum, input) => sum + input.amount, 0n);
  const sign = (change?: bigint) =>
    signTransfer({ ...base, fee: { model: 'per_byte', satPerVbyte }, bitcoin: { inputs, ...(change === undefined ? {} : { change: { address: key.address, amount: change } }) } }, [key]).raw;
  const vsize = (raw: string) => BigInt(btc.Transaction.fromRaw(hex.decode(raw)).vsize);
  const spare = total - base.amount;
  if (spare > 0n) {
    const change = spare - vsize(sign(spare)) * satPerVbyte;
    if (change >= BITCOIN_DUST_LIMIT) return sign(change);
  }
  const withoutChange = sign();
  if (spare < vsize(withoutChange) * satPerVbyte) throw new TransactionRejectedError('insufficient_funds', 'The faucet outputs do not cover the amount and its fee.');
  return withoutChange;
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
  return chosen;
}
