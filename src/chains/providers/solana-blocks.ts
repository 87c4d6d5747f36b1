import { z } from 'zod';
import type { ObservedPayment, ObservedTransfer } from '../provider';

/**
 * What scanning reads of a Solana transaction in `jsonParsed` form, whether a full getBlock carried it or
 * getTransaction answered it alone (a block over the response cap, read page by page): its transfers and
 * what it cost its fee payer.
 */

/**
 * Lamports and token amounts are u64, which Solana's JSON writes as numbers (token amounts also as a
 * string). A JSON number above 2^53 cannot be read exactly: such an answer is refused, never rounded.
 */
export const Lamports = z
  .number()
  .int()
  .nonnegative()
  .refine(Number.isSafeInteger, 'an amount above 2^53 cannot be read exactly')
  .transform((value) => BigInt(value));
export const TokenAmount = z.string().regex(/^\d+$/).transform((value) => BigInt(value));
export const Slot = z.number().int().nonnegative();

const ParsedInstruction = z.object({ program: z.string().optional(), programId: z.string(), parsed: z.unknown().optional() }).loose();
const SystemTransfer = z.object({ type: z.literal('transfer'), info: z.object({ source: z.string(), destination: z.string(), lamports: Lamports }) });
/** Token and Token-2022 `transfer` (an amount) and `transferChecked` (a tokenAmount): the same instructions in both programs. */
const TokenTransfer = z.object({
  type: z.enum(['transfer', 'transferChecked']),
  info: z.object({
    source: z.string(),
    destination: z.string(),
    mint: z.string().optional(),
    amount: TokenAmount.optional(),
    tokenAmount: z.object({ amount: TokenAmount }).loose().optional(),
  }).loose(),
});
/** The programs whose transfers move a configured mint: SPL Token and Token-2022, as jsonParsed names them. */
const TOKEN_PROGRAMS = new Set(['spl-token', 'spl-token-2022']);
const TokenBalance = z.object({ accountIndex: z.number().int().nonnegative(), mint: z.string(), owner: z.string().optional() }).loose();
/** A transaction's meta as far as its payer's cost is read: the fee, lamports per account key before and after, and the token accounts before. */
export const PayerMeta = z.object({
  err: z.unknown(),
  fee: Lamports,
  preBalances: z.array(Lamports).optional(),
  postBalances: z.array(Lamports).optional(),
  preTokenBalances: z.array(TokenBalance).nullish(),
  postTokenBalances: z.array(TokenBalance).nullish(),
});
/** The instructions a top-level instruction (`index`) invoked by CPI, in the order they ran. */
const InnerInstructions = z.object({ index: z.number().int().nonnegative(), instructions: z.array(ParsedInstruction) }).loose();
export const ParsedTransaction = z.object({
  transaction: z.object({
    signatures: z.array(z.string()).min(1),
    message: z.object({ accountKeys: z.array(z.object({ pubkey: z.string() }).loose()).min(1), recentBlockhash: z.string().optional(), instructions: z.array(ParsedInstruction) }).loose(),
  }),
  meta: PayerMeta.extend({ innerInstructions: z.array(InnerInstructions).nullish() }).loose().nullable(),
});
export type ParsedTransaction = z.output<typeof ParsedTransaction>;

/**
 * What a transaction cost its fee payer beyond its transfers: the fee, and the rent of each token
 * account it created (an SPL transfer's CreateIdempotent for a recipient with none: 2,039,280
 * lamports), which leaves the payer for good. The ledger debits this as the send's fee.
 */
export function payerCost(meta: z.output<typeof PayerMeta>): bigint {
  const existed = new Set((meta.preTokenBalances ?? []).map((balance) => balance.accountIndex));
  const lamportsOf = (balances: bigint[] | undefined, index: number) => balances?.[index] ?? 0n;
  return (meta.postTokenBalances ?? [])
    .filter((balance) => !existed.has(balance.accountIndex))
    .reduce((cost, { accountIndex }) => cost + lamportsOf(meta.postBalances, accountIndex) - lamportsOf(meta.preBalances, accountIndex), meta.fee);
}

/**
 * The recent blockhash that bounds a transaction's life, as ObservedPayment carries it; none for a
 * durable-nonce transaction (its first instruction advances a nonce account: the "blockhash" is the
 * nonce's value, valid until the nonce advances, so its expiry proves nothing).
 */
function expiringBlockhash(message: ParsedTransaction['transaction']['message']): { recentBlockhash?: string } {
  const first = message.instructions[0];
  const durable = first?.program === 'system' && (first.parsed as { type?: unknown } | undefined)?.type === 'advanceNonce';
  return message.recentBlockhash && !durable ? { recentBlockhash: message.recentBlockhash } : {};
}

/**
 * One transaction as scanning sees it: its fee payer (first account key) with its cost, failed or not;
 * and, when it succeeded, each System `transfer` (`SOL`) and each Token or Token-2022 `transfer` /
 * `transferChecked` of a configured mint (credited to the destination token account's owner, from the
 * transaction's token balances after it, or before it for an account it closed), top-level at `ix:<n>` and made by a program's CPI at `ix:<n>.<k>` (the
 * k-th instruction top-level instruction n invoked, at any depth): a program moves funds as a wallet does.
 */
export function readTransaction({ transaction, meta }: ParsedTransaction, assetOfMint: ReadonlyMap<string, string>): { payment: ObservedPayment | null; transfers: ObservedTransfer[] } {
  const txid = transaction.signatures[0]!;
  const keys = transaction.message.accountKeys.map((key) => key.pubkey);
  if (!meta) return { payment: null, transfers: [] };
  const payment = { txid, from: keys[0]!, fee: payerCost(meta), ...expiringBlockhash(transaction.message) };
  if (meta.err !== null) return { payment, transfers: [] };
  // Token accounts as they were after the transaction, or before it for one it closed (a source emptied and closed).
  const tokenAccounts = new Map([...(meta.preTokenBalances ?? []), ...(meta.postTokenBalances ?? [])].map((balance) => [keys[balance.accountIndex], balance]));
  const transferOf = (instruction: z.output<typeof ParsedInstruction>, position: string): ObservedTransfer | null => {
    if (instruction.program === 'system') {
      const transfer = SystemTransfer.safeParse(instruction.parsed);
      return transfer.success ? { txid, position, to: transfer.data.info.destination, from: transfer.data.info.source, assetId: 'SOL', amount: transfer.data.info.lamports } : null;
    }
    if (!instruction.program || !TOKEN_PROGRAMS.has(instruction.program)) return null;
    const transfer = TokenTransfer.safeParse(instruction.parsed);
    if (!transfer.success) return null;
    const { destination, source, tokenAmount, amount } = transfer.data.info;
    const account = tokenAccounts.get(destination);
    const assetId = account && assetOfMint.get(account.mint);
    const moved = tokenAmount?.amount ?? amount;
    if (!assetId || !account.owner || moved === undefined) return null;
    return { txid, position, to: account.owner, from: tokenAccounts.get(source)?.owner ?? null, assetId, amount: moved };
  };
  const inner = new Map((meta.innerInstructions ?? []).map((group) => [group.index, group.instructions]));
  const transfers = transaction.message.instructions.flatMap((instruction, index) => [
    transferOf(instruction, `ix:${index}`),
    ...(inner.get(index) ?? []).map((invoked, order) => transferOf(invoked, `ix:${index}.${order}`)),
  ]);
  return { payment, transfers: transfers.filter((transfer): transfer is ObservedTransfer => transfer !== null) };
}
