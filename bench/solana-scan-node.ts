import { mnemonicToSeedSync } from '@scure/bip39';
import { signTransfer } from '../src/chains/transfers';
import { associatedTokenAccount, LAMPORTS_PER_SIGNATURE } from '../src/chains/transfers/solana';
import { coinTypeFor, deriveKey } from '../src/keys/derivation';
import { mintData, putTokenProgramAccount, svmAddress, tokenAccountData } from '../test/support/litesvm';
import { DEVNET_GENESIS, SolanaNode } from '../test/support/solana-node';

/** What the parent (bench/solana-scan.ts) asks of the node. */
export interface ScanNodeRequest {
  /** Transactions in every block. */
  transactions: number;
  /** Each answer's delay: a remote node's round trip. */
  latencyMs: number;
  /** Slots sealed at once before it starts producing, so a backlog can be scanned from the first round. */
  backlog: number;
}

export interface ScanNodeReady {
  url: string;
  mint: string;
  /** The size of one block's getBlock answer (jsonParsed, full transactions), in bytes. */
  blockBytes: number;
}

const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const key = (index: number) => deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: 7, index });
const SOL = 1_000_000_000n;
/** A slot every 400 ms: mainnet-beta's pace, 2.5 slots a second. */
const SLOT_MS = 400;

/**
 * A Solana node at mainnet's pace, in a process of its own (its CPU apart from the scanner's): the test
 * suite's node (test/support/solana-node.ts, LiteSVM behind Solana's JSON-RPC) sealing a slot every 400 ms,
 * each block carrying the same `transactions` the runtime executed once at the start (half SOL transfers,
 * half SPL transfers that create the recipient's token account, none to a custody address: what nearly
 * every mainnet transaction is to a custody service), every answer delayed by `latencyMs`.
 */
async function startNode(request: ScanNodeRequest): Promise<ScanNodeReady> {
  const node = new SolanaNode();
  node.genesis = DEVNET_GENESIS;
  await node.start();
  const payer = key(0);
  const mint = key(1).address;
  putTokenProgramAccount(node.svm, mint, mintData(key(2).address, 10n ** 15n, 6));
  putTokenProgramAccount(node.svm, associatedTokenAccount(payer.address, mint), tokenAccountData(mint, payer.address, 10n ** 15n));
  node.svm.airdrop(svmAddress(payer.address), (1_000n * SOL) as never);
  node.sealAfterSend = false;
  const rpc = async (method: string, params: unknown[]) => {
    const response = await fetch(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    const body = (await response.json()) as { result?: unknown; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result;
  };
  const recentBlock = { height: node.slot, hash: node.svm.latestBlockhash(), time: new Date() };
  for (let index = 0; index < request.transactions; index += 1) {
    const token = index % 2 === 1;
    const signed = signTransfer(
      {
        chain: 'solana',
        testnet: false,
        from: payer.address,
        to: key(100 + index).address,
        assetId: token ? 'USDC_SOL' : 'SOL',
        ...(token ? { tokenAddress: mint } : {}),
        amount: token ? 1_000n + BigInt(index) : SOL / 1000n + BigInt(index),
        fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE },
        recentBlock,
        reference: `bench_${index}`,
      },
      [payer],
    );
    await rpc('sendTransaction', [signed.raw, { encoding: 'base64' }]);
  }
  const poolSlot = node.slot;
  node.svm.warpToSlot(BigInt(poolSlot + 1));
  const { transactions } = (await rpc('getBlock', [poolSlot, { transactionDetails: 'full', encoding: 'jsonParsed' }])) as { transactions: unknown[] };
  // Every slot from now on holds those transactions; headers (and 'none', 'signatures' details) as the node makes them.
  node.recorded.set('getBlock', (params) => {
    const [slot, options] = params as [number, { transactionDetails?: string }?];
    if (slot > node.confirmedSlot || slot < 1) return { error: { code: -32004, message: `Block not available for slot ${slot}` } };
    const header = { blockhash: node.blockHash(slot), previousBlockhash: node.blockHash(slot - 1), parentSlot: slot - 1, blockHeight: slot, blockTime: node.blockTime(slot) };
    if (options?.transactionDetails === 'none') return { result: header };
    return { result: { ...header, transactions } };
  });
  node.svm.warpToSlot(BigInt(node.slot + request.backlog));
  const blockBytes = Buffer.byteLength(JSON.stringify({ jsonrpc: '2.0', id: 1, result: await rpc('getBlock', [node.confirmedSlot, {}]) }));
  node.latencyMs = request.latencyMs;
  node.produceBlocks(SLOT_MS);
  return { url: node.url, mint, blockBytes };
}

process.once('message', (request: ScanNodeRequest) => {
  startNode(request).then(
    (ready) => process.send!(ready),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
