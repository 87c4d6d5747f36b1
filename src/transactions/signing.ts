/** The signing step of a send: its transfer built and signed once, with the keys of its wallet's addresses. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById } from '../catalogue/service';
import { signTransfer, type TransferToSign } from '../chains/transfers';
import { Address } from '../custody/entities';
import { keyLocation } from '../custody/service';
import { OutgoingTransaction, WalletOutput } from './entities';
import { recordChange } from './wallet-outputs';
import { feeTermsOf, FINISHED, lockedRow, providerOf, type LifecycleDeps, type StepOutcome } from './lifecycle';

/**
 * Builds and signs the send once and stores the signed bytes with their hash before anything is
 * broadcast: every later broadcast sends these very bytes, so a retry can never spend twice.
 * Ethereum takes its nonce here, under the sending address's row lock: the lowest from the node's
 * pending count that none of the platform's live sends from the address holds.
 */
export async function signTransaction(deps: LifecycleDeps, transactionId: string): Promise<StepOutcome> {
  // What the node says is read before any row is locked: the devnet answers from this same database,
  // and a send holding a lock while it waits for a second connection could starve the pool.
  const unlocked = await deps.em().findOneOrFail(OutgoingTransaction, { id: transactionId }, { populate: ['fromAddress'] });
  if (unlocked.signedTransaction) return 'signed';
  if (FINISHED.includes(unlocked.status)) return unlocked.status;
  const provider = await providerOf(deps, unlocked);
  const node = {
    // Tron and Solana transactions name a recent block, which also bounds how long they can be broadcast.
    recentBlock: provider.recentBlock ? await provider.recentBlock() : undefined,
    chainId: unlocked.chain === 'ethereum' ? (await provider.identifyNetwork()).chainId : undefined,
    pendingNonce: unlocked.chain === 'ethereum' ? (await provider.nonces!(unlocked.fromAddress.address)).pending : undefined,
  };
  return deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (transaction.signedTransaction) return 'signed';
    if (FINISHED.includes(transaction.status)) return transaction.status;
    const from = transaction.fromAddress;
    const asset = assetById(transaction.assetId);
    const transfer: TransferToSign = {
      chain: transaction.chain,
      testnet: transaction.environment === 'sandbox',
      from: from.address,
      to: transaction.toAddress,
      assetId: asset.id,
      amount: BigInt(transaction.recipientAmount),
      fee: feeTermsOf(transaction.feeTerms),
      reference: transaction.id,
      ...(node.recentBlock ? { recentBlock: node.recentBlock } : {}),
    };
    if (asset.type !== 'native') {
      const token = provider.tokenAddress(asset.id);
      if (!token) throw new Error(`no ${asset.id} contract is configured for ${transaction.chain} ${transaction.environment}`);
      transfer.tokenAddress = token;
    }
    if (transaction.chain === 'ethereum') {
      // Serializes nonce picks of one address. FOR NO KEY UPDATE, not FOR UPDATE: the journal entries and balance rows
      // that reference the address take key-share locks, which FOR UPDATE would queue behind (and deadlock with sends).
      await em.execute(`select id from addresses where id = ? for no key update`, [from.id]);
      // The lowest nonce from the node's pending count that no live send of ours holds: past our signed sends the
      // node has not seen yet, and into the gap a refused send left, without which those after it would never be mined.
      const [free] = await em.execute<{ nonce: string }[]>(
        `select min(candidate)::text as nonce from (
           select ?::bigint as candidate
           union all select nonce + 1 from transactions where from_address_id = ? and nonce is not null and status <> 'failed'
         ) candidates
         where candidate >= ? and not exists (
           select 1 from transactions held where held.from_address_id = ? and held.nonce = candidate and held.status <> 'failed')`,
        [node.pendingNonce!.toString(), from.id, node.pendingNonce!.toString(), from.id],
      );
      const nonce = BigInt(free!.nonce);
      transfer.ethereum = { chainId: node.chainId!, nonce };
      transaction.nonce = nonce.toString();
    }
    let signers: Address[] = [from];
    let change: { address: Address; amount: bigint } | null = null;
    if (transaction.chain === 'bitcoin') {
      const spent = await bitcoinInputsOf(em, transaction);
      signers = spent.signers;
      const changeAmount = spent.total - BigInt(transaction.recipientAmount) - BigInt(transaction.feeLimit);
      if (changeAmount < 0n) throw new Error(`transaction ${transaction.id}: its inputs do not cover amount and fee`);
      if (changeAmount > 0n) change = { address: from, amount: changeAmount };
      transfer.bitcoin = { inputs: spent.inputs, ...(change ? { change: { address: change.address.address, amount: change.amount } } : {}) };
    }

    const signed = await signWithKeysOf(deps, em, transaction, signers, transfer);
    transaction.signedTransaction = signed.raw;
    transaction.txHash = signed.txid;
    transaction.status = 'signed';
    // The change output (vout 1, after the recipient's) is the wallet's own, never a deposit.
    if (change) await recordChange(em, transaction, { txid: signed.txid, vout: 1, amount: change.amount, address: change.address });
    return 'signed';
  });
}

/**
 * The outputs a Bitcoin send locked, as the inputs of its transfer (the original and every
 * replacement spend exactly these): their total and the addresses whose keys sign them.
 */
export async function bitcoinInputsOf(em: EntityManager, transaction: OutgoingTransaction) {
  const outputs = await em.find(WalletOutput, { spentBy: transaction.id }, { populate: ['address'], orderBy: { txid: 'asc', vout: 'asc' } });
  const signers = [...new Map(outputs.map((output) => [output.address.id, output.address])).values()];
  return {
    signers,
    total: outputs.reduce((sum, output) => sum + BigInt(output.amount), 0n),
    inputs: outputs.map((output) => ({ txid: output.txid, vout: output.vout, amount: BigInt(output.amount), address: output.address.address, key: signers.findIndex((a) => a.id === output.address.id) })),
  };
}

/** Signs `transfer` with the keys of the send's wallet at `signers` (its addresses). */
export function signWithKeysOf(deps: LifecycleDeps, em: EntityManager, transaction: OutgoingTransaction, signers: Address[], transfer: TransferToSign) {
  const wallet = transaction.wallet;
  return deps.keys.withKeys(
    em,
    transaction.organization.id,
    transaction.environment,
    signers.map((address) => keyLocation(wallet, address.format, address.addressIndex)),
    (keys) => {
      // A key that does not give the stored address means a wrong seed or master key: never sign with it.
      keys.forEach((key, index) => {
        if (key.address !== signers[index]!.address) throw new Error(`address ${signers[index]!.id} does not match its derived key`);
      });
      return signTransfer(transfer, keys);
    },
  );
}
