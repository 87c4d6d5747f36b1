import type { EntityManager } from '@mikro-orm/postgresql';
import { base58, base64 } from '@scure/base';
import { TransactionRejectedError, type RelayedAnswer, type RelayedCall } from '../../provider';
import { SOLANA_BLOCKHASH_VALID_BLOCKS } from '../../transfers/solana';
import { DevnetBlock, DevnetTransaction } from '../entities';
import { acceptDevnetTransaction } from '../acceptance';
import { devnetBalance, devnetTip } from '../ledger-reads';
import type { DevnetProvider } from '../provider';
import { InvalidParams, methodNotFound, param, requireString, result, rpcError, withParams } from './answers';

/** When a slot counts as finalized, as on Solana. */
const FINALIZED_CONFIRMATIONS = 32;
/** The code Solana's RPC gives a transaction its preflight refuses. */
const SEND_TRANSACTION_PREFLIGHT_FAILURE = -32002;
const MAX_SIGNATURES = 256;

/**
 * The devnet's Solana subset, answered as Solana's JSON-RPC does. Lamports are JSON numbers, as
 * Solana writes them (the faucet holds less than 2^53). Slots and block heights are the same on the devnet.
 */
export function answerSolanaCall(_provider: DevnetProvider, em: EntityManager, call: RelayedCall): Promise<RelayedAnswer> {
  return withParams(async () => {
    switch (call.method) {
      case 'getSlot':
      case 'getBlockHeight':
        return result((await devnetTip(em, 'solana')).height);
      case 'getBalance': {
        const tip = await devnetTip(em, 'solana');
        const lamports = await devnetBalance(em, 'solana', requireString(param(call, 0, 'pubkey'), 'the public key'), 'SOL');
        return result({ context: { slot: tip.height }, value: Number(lamports) });
      }
      case 'getLatestBlockhash': {
        const tip = await devnetTip(em, 'solana');
        return result({ context: { slot: tip.height }, value: { blockhash: tip.hash, lastValidBlockHeight: tip.height + SOLANA_BLOCKHASH_VALID_BLOCKS } });
      }
      case 'sendTransaction': {
        const encoded = requireString(param(call, 0, 'transaction'), 'the transaction');
        // Solana's default encoding is base58; the devnet's rules take base64.
        const encoding = (param(call, 1, 'config') as { encoding?: unknown } | undefined)?.encoding ?? 'base58';
        let raw: string;
        try {
          raw = encoding === 'base64' ? encoded : base64.encode(base58.decode(encoded));
        } catch {
          throw new InvalidParams(`the transaction is not ${String(encoding)}`);
        }
        try {
          return result((await acceptDevnetTransaction(em, 'solana', raw)).txid);
        } catch (error) {
          if (error instanceof TransactionRejectedError) return rpcError(SEND_TRANSACTION_PREFLIGHT_FAILURE, `Transaction simulation failed: ${error.message}`, { reason: error.reason });
          throw error;
        }
      }
      case 'getTransaction': {
        const config = param(call, 1, 'config') as { encoding?: unknown } | undefined;
        if (config?.encoding !== 'base64') return rpcError(-32602, "Invalid params: the devnet answers getTransaction with { encoding: 'base64' }");
        const entry = await em.findOne(DevnetTransaction, { chain: 'solana', txid: requireString(param(call, 0, 'signature'), 'the signature'), status: 'mined' });
        if (!entry) return result(null);
        const block = await em.findOneOrFail(DevnetBlock, { chain: 'solana', height: entry.blockHeight! });
        return result({
          slot: block.height,
          blockTime: Math.floor(block.time.getTime() / 1000),
          meta: { err: null, fee: Number(BigInt(entry.feePaid!)), status: { Ok: null } },
          transaction: [entry.raw, 'base64'],
        });
      }
      case 'getSignatureStatuses': {
        const signatures = param(call, 0, 'signatures');
        if (!Array.isArray(signatures) || signatures.length > MAX_SIGNATURES || signatures.some((value) => typeof value !== 'string')) {
          throw new InvalidParams(`signatures must be an array of at most ${MAX_SIGNATURES} strings`);
        }
        const tip = await devnetTip(em, 'solana');
        const entries = await em.find(DevnetTransaction, { chain: 'solana', txid: { $in: signatures as string[] } });
        const byId = new Map(entries.map((entry) => [entry.txid, entry]));
        return result({
          context: { slot: tip.height },
          value: (signatures as string[]).map((signature) => {
            const entry = byId.get(signature);
            if (!entry) return null;
            if (entry.status === 'mempool') return { slot: tip.height, confirmations: 0, err: null, status: { Ok: null }, confirmationStatus: 'processed' };
            const confirmations = tip.height - entry.blockHeight!;
            const finalized = confirmations >= FINALIZED_CONFIRMATIONS;
            return { slot: entry.blockHeight, confirmations: finalized ? null : confirmations, err: null, status: { Ok: null }, confirmationStatus: finalized ? 'finalized' : 'confirmed' };
          }),
        });
      }
      default:
        return methodNotFound(call, 'solana');
    }
  });
}
