import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { base58 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import { ChainNodes, ChainUnavailableError } from '../../src/chains/nodes';
import { NodeUnavailableError, TransactionRejectedError } from '../../src/chains/provider';
import { levelPrices, RecentPrioritizationFees } from '../../src/chains/providers/solana-fees';
import { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { signTransfer, type TransferToSign } from '../../src/chains/transfers';
import { associatedTokenAccount, COMPUTE_BUDGET_PROGRAM, LAMPORTS_PER_SIGNATURE, PRIORITY_COMPUTE_UNIT_LIMIT, priorityFeeOf, SET_COMPUTE_UNIT_LIMIT, SOLANA_TOKEN_ACCOUNT_RENT } from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey, type DerivedKey } from '../../src/keys/derivation';
import { testConfig } from '../support/environment';
import { messageInstructions, mintData, putTokenProgramAccount, svmAddress, tokenAccountData } from '../support/litesvm';
import { DEVNET_GENESIS, MAINNET_GENESIS, SolanaNode, SYSTEM_PROGRAM_ID as SYSTEM_PROGRAM, TOKEN_PROGRAM_ID as TOKEN_PROGRAM } from '../support/solana-node';
import { testLogger } from '../support/secret-scan';

/**
 * The live Solana provider (src/chains/providers/solana-rpc.ts) against a local server speaking Solana's
 * JSON-RPC. What the Solana runtime can answer, LiteSVM answers: balances, the latest blockhash, the
 * sending (the provider's bytes executed by the runtime), signature statuses and fees of what it
 * executed. Where no runtime can answer (the cluster's genesis hash, blocks as a cluster stores them,
 * skipped slots, recent prioritization fees), the answers are recorded in the shape Solana's RPC
 * documentation gives.
 */

const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const ACCOUNT = randomInt(1, 2 ** 30);
const walletKey = (index: number): DerivedKey => deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: ACCOUNT, index });
const SOL = 1_000_000_000n;

describe('Solana JSON-RPC provider (solana-rpc): LiteSVM behind a local Solana RPC, recorded answers where no runtime answers', () => {
  let node: SolanaNode;
  let provider: SolanaRpcProvider;
  let sender: DerivedKey;
  let recipient: DerivedKey;
  let mint: string;
  const limits = { timeoutMs: 5_000, maxResponseBytes: 1_000_000 };

  beforeEach(async () => {
    node = new SolanaNode();
    await node.start();
    sender = walletKey(0);
    recipient = walletKey(1);
    mint = walletKey(9).address;
    putTokenProgramAccount(node.svm, mint, mintData(walletKey(8).address, 1_000n * 10n ** 6n, 6));
    putTokenProgramAccount(node.svm, associatedTokenAccount(sender.address, mint), tokenAccountData(mint, sender.address, 1_000n * 10n ** 6n));
    node.svm.airdrop(svmAddress(sender.address), (5n * SOL) as never);
    provider = new SolanaRpcProvider(node.url, limits, { USDC_SOL: mint });
  });

  afterEach(() => node.stop());

  /** A live transfer as the send workflow builds it, on the provider's recent blockhash. */
  const transfer = async (fields: Partial<TransferToSign> & Pick<TransferToSign, 'assetId' | 'amount'>): Promise<TransferToSign> => ({
    chain: 'solana',
    testnet: false,
    from: sender.address,
    to: recipient.address,
    fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE },
    recentBlock: await provider.recentBlock(),
    reference: `tx_${randomInt(2 ** 40)}`,
    ...fields,
  });

  describe('the network check (ChainNodes)', () => {
    const nodes = (overrides: Record<string, string>) => new ChainNodes(testConfig(overrides), testLogger('test'), undefined as never);

    it('serves live keys from a mainnet-beta node whose mints have the catalogue decimals', async () => {
      const served = await nodes({ CHAIN_NODE_SOLANA_LIVE: node.url, CHAIN_TOKENS_SOLANA_LIVE: `USDC_SOL=${mint}` }).provider('solana', 'live');
      assert.equal(served.kind, 'solana-rpc');
      assert.deepEqual(await served.identifyNetwork(), { network: 'mainnet-beta' });
    });

    it('refuses a live node on another cluster, a sandbox node on mainnet-beta, and a mint of other decimals', async () => {
      node.genesis = DEVNET_GENESIS;
      const live = nodes({ CHAIN_NODE_SOLANA_LIVE: node.url, CHAIN_TOKENS_SOLANA_LIVE: `USDC_SOL=${mint}` });
      await assert.rejects(live.provider('solana', 'live'), (error) => error instanceof ChainUnavailableError && error.reason === 'network_mismatch');
      // Sandbox keys on devnet are fine; never on mainnet-beta.
      assert.equal((await nodes({ CHAIN_NODE_SOLANA_SANDBOX: node.url }).provider('solana', 'sandbox', undefined)).kind, 'solana-rpc');
      node.genesis = MAINNET_GENESIS;
      await assert.rejects(nodes({ CHAIN_NODE_SOLANA_SANDBOX: node.url }).provider('solana', 'sandbox'), (error) => error instanceof ChainUnavailableError && error.reason === 'network_mismatch');
      const nineDecimals = walletKey(10).address;
      putTokenProgramAccount(node.svm, nineDecimals, mintData(walletKey(8).address, 1n, 9));
      const wrongMint = nodes({ CHAIN_NODE_SOLANA_LIVE: node.url, CHAIN_TOKENS_SOLANA_LIVE: `USDC_SOL=${nineDecimals}` });
      await assert.rejects(wrongMint.provider('solana', 'live'), (error) => error instanceof ChainUnavailableError && error.reason === 'token_mismatch');
      // The default live mint (Circle's USDC) is no mint on this node: refused too, never served blind.
      await assert.rejects(nodes({ CHAIN_NODE_SOLANA_LIVE: node.url }).provider('solana', 'live'), (error) => error instanceof ChainUnavailableError && error.reason === 'token_mismatch');
    });
  });

  describe('sending: the provider hands the signed bytes to the runtime', () => {
    it('broadcasts a SOL transfer on its recent blockhash; balances, status and fee are what the runtime says', async () => {
      const signed = signTransfer(await transfer({ assetId: 'SOL', amount: SOL / 2n, fee: { model: 'flat', fee: 15_000n } }), [sender]);
      assert.deepEqual(await provider.broadcast(signed.raw), { txid: signed.txid });
      assert.equal(await provider.balance(sender.address, 'SOL'), 5n * SOL - SOL / 2n - 15_000n);
      assert.equal(await provider.balance(recipient.address, 'SOL'), SOL / 2n);

      assert.deepEqual(await provider.transactionStatus(signed.txid), { state: 'pending' }, 'processed only: not yet mined');
      node.executed.get(signed.txid)!.confirmationStatus = 'confirmed';
      node.svm.warpToSlot(BigInt(node.slot + 4));
      const status = await provider.transactionStatus(signed.txid);
      assert.equal(status.state, 'mined');
      assert.deepEqual(status, { state: 'mined', blockHeight: node.confirmedSlot - 4, blockHash: node.executed.get(signed.txid)!.blockhash, confirmations: 5, succeeded: true, fee: 15_000n });
      assert.deepEqual(await provider.transactionStatus(base58.encode(new Uint8Array(64).fill(7))), { state: 'unknown' });
    });

    it("broadcasts an SPL transfer that creates the recipient's token account; the token balance is the runtime's", async () => {
      const signed = signTransfer(await transfer({ assetId: 'USDC_SOL', amount: 2_500_000n, tokenAddress: mint }), [sender]);
      await provider.broadcast(signed.raw);
      assert.equal(await provider.balance(recipient.address, 'USDC_SOL'), 2_500_000n);
      assert.equal(await provider.balance(sender.address, 'USDC_SOL'), 1_000n * 10n ** 6n - 2_500_000n);
      assert.equal(node.executed.get(signed.txid)!.fee, Number(LAMPORTS_PER_SIGNATURE), 'the rent went to the new account, not to the fee');
      const rent = node.svm.minimumBalanceForRentExemption(165n);
      assert.equal(rent, SOLANA_TOKEN_ACCOUNT_RENT, "the rent the send's fee limit counts is the runtime's");
      const solBefore = await provider.balance(sender.address, 'SOL');
      assert.equal(solBefore, 5n * SOL - LAMPORTS_PER_SIGNATURE - rent);

      // What the ledger debits as the send's fee is what left the sender's SOL: the fee and the new account's rent.
      node.executed.get(signed.txid)!.confirmationStatus = 'finalized';
      const status = await provider.transactionStatus(signed.txid);
      assert.equal(status.state === 'mined' && status.fee, LAMPORTS_PER_SIGNATURE + rent);

      // The recipient's account exists now: the next transfer pays the fee alone, and that alone is its cost.
      const again = signTransfer(await transfer({ assetId: 'USDC_SOL', amount: 500_000n, tokenAddress: mint }), [sender]);
      await provider.broadcast(again.raw);
      node.executed.get(again.txid)!.confirmationStatus = 'finalized';
      const second = await provider.transactionStatus(again.txid);
      assert.equal(second.state === 'mined' && second.fee, LAMPORTS_PER_SIGNATURE);
      assert.equal(await provider.balance(sender.address, 'SOL'), solBefore - LAMPORTS_PER_SIGNATURE);
      assert.equal(await provider.balance(recipient.address, 'USDC_SOL'), 3_000_000n);
    });

    it('counts a retried broadcast of a processed transaction as broadcast, and maps refusals to reasons', async () => {
      const signed = signTransfer(await transfer({ assetId: 'SOL', amount: SOL }), [sender]);
      await provider.broadcast(signed.raw);
      assert.deepEqual(await provider.broadcast(signed.raw), { txid: signed.txid }, 'AlreadyProcessed: already broadcast');
      assert.equal(await provider.balance(recipient.address, 'SOL'), SOL, 'once');

      const broke = walletKey(5);
      const unfunded = signTransfer(await transfer({ assetId: 'SOL', amount: SOL, from: broke.address }), [broke]);
      await assert.rejects(provider.broadcast(unfunded.raw), (error) => error instanceof TransactionRejectedError && error.reason === 'insufficient_funds');
      const dust = signTransfer(await transfer({ assetId: 'SOL', amount: 1_000n, to: walletKey(6).address }), [sender]);
      await assert.rejects(provider.broadcast(dust.raw), (error) => error instanceof TransactionRejectedError && error.reason === 'dust_output');
      const stale = signTransfer(await transfer({ assetId: 'SOL', amount: SOL }), [sender]);
      assert.equal(await provider.validityPassed(stale.raw), false, 'its blockhash is still valid');
      node.svm.expireBlockhash();
      await assert.rejects(provider.broadcast(stale.raw), (error) => error instanceof TransactionRejectedError && /BlockhashNotFound/.test(error.message));
      assert.equal(await provider.validityPassed(stale.raw), true, 'the proof that it can never be mined: its blockhash expired');
      assert.equal(node.calls.at(-1), 'isBlockhashValid');
    });

    it('prices the fee levels from recent prioritization fees; the high level, signed, costs exactly that in the runtime', async () => {
      // Recorded: getRecentPrioritizationFees as documented (micro-lamports per compute unit, per recent slot).
      const fees = [0, 1000, 500, 0, 1234].map((prioritizationFee, index) => ({ slot: 348125 + index, prioritizationFee }));
      node.recorded.set('getRecentPrioritizationFees', () => ({ result: fees }));
      const market = await provider.feeMarket();
      // 200,000 compute units (the builder's limit) at the 10th, 50th and 90th percentile prices, rounded up.
      assert.deepEqual(market, { model: 'flat', transferFee: { low: 5_000n, medium: 5_100n, high: 5_247n } });
      const signed = signTransfer(await transfer({ assetId: 'SOL', amount: SOL, fee: { model: 'flat', fee: market.transferFee.high } }), [sender]);
      await provider.broadcast(signed.raw);
      assert.equal(node.executed.get(signed.txid)!.fee, 5_247);
      assert.equal(await provider.balance(sender.address, 'SOL'), 5n * SOL - SOL - 5_247n);
    });

    describe("a transfer's compute budget: the fees paid for the accounts it writes, the units its simulation used", () => {
      /** A SOL transfer from `from` to `to` the runtime executes at `unitPrice` micro-lamports a unit (a limit of 1,000 units), in the current slot. */
      const payAtPrice = async (from: DerivedKey, to: string, unitPrice: bigint) => {
        const computeBudget = { unitLimit: 1_000n, unitPrice };
        const fee = LAMPORTS_PER_SIGNATURE + priorityFeeOf(computeBudget);
        await provider.broadcast(signTransfer(await transfer({ from: from.address, to, assetId: 'SOL', amount: SOL / 10n, fee: { model: 'flat', fee, computeBudget } }), [from]).raw);
      };
      const computeUnitLimitOf = (raw: string) => {
        const limit = messageInstructions(raw).find(({ program, data }) => program === base58.encode(COMPUTE_BUDGET_PROGRAM) && data[0] === SET_COMPUTE_UNIT_LIMIT);
        return limit ? BigInt(new DataView(limit.data.buffer, limit.data.byteOffset).getUint32(1, true)) : undefined;
      };

      it('prices at the fees paid where the transfer writes, not the whole block; signed with its simulated units plus a fifth, it costs exactly its fee', async () => {
        const busy = walletKey(30);
        node.svm.airdrop(svmAddress(busy.address), (10n * SOL) as never);
        // 16 of the 150 recent slots: in each an unrelated transfer paid nothing and one to the recipient paid 500,000 micro-lamports a unit.
        node.sealAfterSend = false;
        const busySlots: number[] = [];
        for (let slot = 0; slot < 16; slot += 1) {
          await payAtPrice(busy, walletKey(31).address, 0n);
          await payAtPrice(busy, recipient.address, 500_000n);
          busySlots.push(node.slot);
          node.svm.warpToSlot(BigInt(node.slot + 1));
        }
        node.sealAfterSend = true;
        const busySlot = busySlots[0]!;
        const [all, writes] = await provider.relay([
          { method: 'getRecentPrioritizationFees', params: [[]] },
          { method: 'getRecentPrioritizationFees', params: [[sender.address, recipient.address]] },
        ]);
        const atBusySlot = (answer: typeof all) => ((answer as { result: { slot: number; prioritizationFee: number }[] }).result.find((entry) => entry.slot === busySlot)!.prioritizationFee);
        assert.equal(atBusySlot(all), 0, "the block's lowest price: what locking no account had to outbid");
        assert.equal(atBusySlot(writes), 500_000, 'the lowest price among the transactions writing the recipient');

        const budget = await provider.transferComputeBudget({ from: sender.address, to: recipient.address, assetId: 'SOL', amount: SOL });
        assert.deepEqual(budget.unitPrice, levelPrices(RecentPrioritizationFees.parse((writes as { result: unknown }).result)));
        assert.deepEqual(budget.unitPrice, { low: 0n, medium: 0n, high: 500_000n }, 'the 90th percentile is among the 16 slots that wrote the recipient at 500,000');
        const market = await provider.feeMarket();
        assert.equal(market.model === 'flat' && market.transferFee.high, LAMPORTS_PER_SIGNATURE, 'the network-wide fee sees none of it');
        assert.equal(budget.limitFrom, 'simulation');

        const computeBudget = { unitLimit: budget.unitLimit, unitPrice: budget.unitPrice.high };
        const fee = LAMPORTS_PER_SIGNATURE + priorityFeeOf(computeBudget);
        const signed = signTransfer(await transfer({ assetId: 'SOL', amount: SOL, fee: { model: 'flat', fee, computeBudget } }), [sender]);
        await provider.broadcast(signed.raw);
        const executed = node.executed.get(signed.txid)!;
        // A SOL transfer uses 450 units (two Compute Budget instructions and the transfer): a fifth more is under the 1,000-unit floor.
        assert.equal(executed.unitsConsumed, 450n);
        assert.equal(computeUnitLimitOf(signed.raw), 1_000n);
        assert.equal(BigInt(executed.fee), fee, 'the runtime charges the fee the budget was priced at');
        assert.equal(fee, 5_500n);

        // An SPL transfer creating the recipient's token account uses some 14,000 units: its limit is those and a fifth more.
        const token = await provider.transferComputeBudget({ from: sender.address, to: walletKey(32).address, assetId: 'USDC_SOL', amount: 2_000_000n, tokenAddress: mint });
        const tokenBudget = { unitLimit: token.unitLimit, unitPrice: token.unitPrice.medium };
        const tokenFee = LAMPORTS_PER_SIGNATURE + priorityFeeOf(tokenBudget);
        const tokenSigned = signTransfer(await transfer({ to: walletKey(32).address, assetId: 'USDC_SOL', amount: 2_000_000n, tokenAddress: mint, fee: { model: 'flat', fee: tokenFee, computeBudget: tokenBudget } }), [sender]);
        await provider.broadcast(tokenSigned.raw);
        const units = node.executed.get(tokenSigned.txid)!.unitsConsumed;
        assert.ok(units > 5_000n, `${units} units`);
        assert.equal(computeUnitLimitOf(tokenSigned.raw), units + (units * 20n + 99n) / 100n, "the simulation's units plus a fifth, rounded up");
        assert.equal(BigInt(node.executed.get(tokenSigned.txid)!.fee), tokenFee);
      });

      it('refuses a transfer the simulation says fails; falls back to the fixed limit when the node cannot simulate', async () => {
        const sol = (fields: Partial<Parameters<SolanaRpcProvider['transferComputeBudget']>[0]> = {}) => provider.transferComputeBudget({ from: sender.address, to: recipient.address, assetId: 'SOL', amount: SOL, ...fields });
        const refused = (reason: string) => (error: unknown) => error instanceof TransactionRejectedError && error.reason === reason;
        await assert.rejects(sol({ amount: 6n * SOL }), refused('insufficient_funds'), 'more than the sender holds: the System transfer fails');
        await assert.rejects(sol({ from: walletKey(5).address }), refused('insufficient_funds'), 'a sender never credited: AccountNotFound');
        await assert.rejects(sol({ amount: 1_000n }), refused('dust_output'), 'a new account left below rent exemption');
        await assert.rejects(sol({ assetId: 'USDC_SOL', tokenAddress: mint, amount: 10n ** 12n }), refused('insufficient_funds'), 'more tokens than the sender holds');

        const fixed = { unitLimit: PRIORITY_COMPUTE_UNIT_LIMIT, limitFrom: 'fixed' };
        const simulationAnswers: unknown[] = [
          { error: { code: -32601, message: 'Method not found' } },
          { error: { code: -32005, message: 'Node is behind by 42 slots' } },
          { result: { context: { slot: 1 }, value: { err: 'BlockhashNotFound', logs: [], accounts: null } } },
          { result: { context: { slot: 1 }, value: { err: null, logs: [], accounts: null } } },
        ];
        for (const answer of simulationAnswers) {
          node.recorded.set('simulateTransaction', () => answer as { result: unknown });
          const budget = await sol();
          assert.deepEqual({ unitLimit: budget.unitLimit, limitFrom: budget.limitFrom }, fixed, JSON.stringify(answer));
        }
        node.recorded.set('getRecentPrioritizationFees', () => ({ error: { code: -32603, message: 'Internal error' } }));
        await assert.rejects(sol(), NodeUnavailableError, 'no fees, no price: the node is unavailable, as for the fee market');
        node.recorded.delete('getRecentPrioritizationFees');
        const [tooMany] = await provider.relay([{ method: 'getRecentPrioritizationFees', params: [Array.from({ length: 129 }, (_, index) => walletKey(40 + index).address)] }]);
        assert.deepEqual(tooMany, { error: { code: -32602, message: 'Too many inputs provided; max 128' } });
      });
    });

    it('relays pass-through calls in one batch, answered in order with the node errors verbatim', async () => {
      const answers = await provider.relay([{ method: 'getSlot', params: [] }, { method: 'getBalance', params: [sender.address] }, { method: 'getNothing', params: [] }]);
      assert.deepEqual(answers, [{ result: node.confirmedSlot }, { result: { context: { slot: node.confirmedSlot }, value: Number(5n * SOL) } }, { error: { code: -32601, message: 'Method not found' } }]);
    });

    it("reads a reconciliation's balances from one state per call, at the confirmed slot: lamports, and the associated token account's amount", async () => {
      const signed = signTransfer(await transfer({ assetId: 'USDC_SOL', amount: 2_500_000n, tokenAddress: mint }), [sender]);
      await provider.broadcast(signed.raw);
      // A token account of the sender's that is not its associated one: not where custody holds tokens, not read.
      putTokenProgramAccount(node.svm, walletKey(11).address, tokenAccountData(mint, sender.address, 9n));
      const owners = Array.from({ length: 120 }, (_, index) => walletKey(20 + index).address);
      const reads = [
        { address: sender.address, assetId: 'SOL' },
        { address: sender.address, assetId: 'USDC_SOL' },
        { address: recipient.address, assetId: 'USDC_SOL' },
        ...owners.map((address) => ({ address, assetId: 'USDC_SOL' })),
      ];
      const calls = node.calls.length;
      const read = await provider.balancesAtNewest(reads);
      assert.deepEqual(node.calls.slice(calls), ['getMultipleAccounts', 'getMultipleAccounts'], '100 accounts a call, in one batch');
      assert.deepEqual(
        read.slice(0, 4),
        [
          { balance: await provider.balance(sender.address, 'SOL'), height: node.confirmedSlot },
          { balance: 1_000n * 10n ** 6n - 2_500_000n, height: node.confirmedSlot },
          { balance: 2_500_000n, height: node.confirmedSlot },
          { balance: 0n, height: node.confirmedSlot },
        ],
      );
      assert.equal(await provider.balance(sender.address, 'USDC_SOL'), 1_000n * 10n ** 6n - 2_500_000n + 9n, 'balance sums every token account of the owner');
      assert.equal(read.length, reads.length);
      // An associated address holding something else than a token account of its mint is no answer to trust.
      node.svm.airdrop(svmAddress(associatedTokenAccount(owners[0]!, mint)), SOL as never);
      await assert.rejects(provider.balancesAtNewest([{ address: owners[0]!, assetId: 'USDC_SOL' }]), /no token account of its mint/);
    });

    it('refuses to read a lamport amount a JSON number cannot hold exactly (above 2^53)', async () => {
      node.recorded.set('getBalance', () => ({ result: { context: { slot: 1 }, value: 2 ** 53 + 2 } }));
      await assert.rejects(provider.balance(sender.address, 'SOL'), /unexpected shape/);
    });
  });

  describe('scanning blocks (recorded getBlock answers, jsonParsed)', () => {
    const hashes = { 99: 'Hash99aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 100: 'Hash100aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 102: 'Hash102aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' } as const;
    const key = (pubkey: string, signer: boolean, writable: boolean) => ({ pubkey, signer, writable, source: 'transaction' });

    beforeEach(() => {
      const recipientTokens = associatedTokenAccount(recipient.address, mint);
      const senderTokens = associatedTokenAccount(sender.address, mint);
      const payment = {
        transaction: {
          signatures: ['SigSol1'],
          message: {
            accountKeys: [key(sender.address, true, true), key(recipient.address, false, true), key(SYSTEM_PROGRAM, false, false)],
            instructions: [{ program: 'system', programId: SYSTEM_PROGRAM, parsed: { type: 'transfer', info: { source: sender.address, destination: recipient.address, lamports: 1_500_000_000 } }, stackHeight: null }],
            recentBlockhash: hashes[99],
          },
        },
        meta: { err: null, fee: 5000, preBalances: [], postBalances: [], postTokenBalances: [], status: { Ok: null } },
        version: 'legacy',
      };
      const token = {
        transaction: {
          signatures: ['SigToken1'],
          message: {
            accountKeys: [key(sender.address, true, true), key(senderTokens, false, true), key(recipientTokens, false, true), key(mint, false, false), key(TOKEN_PROGRAM, false, false)],
            instructions: [
              { program: 'spl-associated-token-account', programId: 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL', parsed: { type: 'createIdempotent', info: {} }, stackHeight: null },
              {
                program: 'spl-token',
                programId: TOKEN_PROGRAM,
                parsed: { type: 'transferChecked', info: { source: senderTokens, destination: recipientTokens, mint, authority: sender.address, tokenAmount: { amount: '2500000', decimals: 6, uiAmount: 2.5, uiAmountString: '2.5' } } },
                stackHeight: null,
              },
            ],
            recentBlockhash: hashes[99],
          },
        },
        meta: {
          err: null,
          fee: 15000,
          postTokenBalances: [
            { accountIndex: 1, mint, owner: sender.address, programId: TOKEN_PROGRAM, uiTokenAmount: { amount: '997500000', decimals: 6 } },
            { accountIndex: 2, mint, owner: recipient.address, programId: TOKEN_PROGRAM, uiTokenAmount: { amount: '2500000', decimals: 6 } },
          ],
          status: { Ok: null },
        },
        version: 'legacy',
      };
      const failed = {
        transaction: {
          signatures: ['SigFailed1'],
          // A durable-nonce transaction: its first instruction advances a nonce account, its "blockhash" is the nonce's value.
          message: {
            accountKeys: [key(recipient.address, true, true), key(sender.address, false, true)],
            instructions: [
              { program: 'system', programId: SYSTEM_PROGRAM, parsed: { type: 'advanceNonce', info: { nonceAccount: sender.address, nonceAuthority: recipient.address } } },
              { program: 'system', programId: SYSTEM_PROGRAM, parsed: { type: 'transfer', info: { source: recipient.address, destination: sender.address, lamports: 7 } } },
            ],
            recentBlockhash: 'NonceValueaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
          },
        },
        meta: { err: { InstructionError: [0, { Custom: 1 }] }, fee: 5000, postTokenBalances: [], status: { Err: { InstructionError: [0, { Custom: 1 }] } } },
      };
      node.recorded.set('getBlock', ([slot]) => {
        if (slot === 100) return { result: { blockhash: hashes[100], previousBlockhash: hashes[99], parentSlot: 99, blockHeight: 90, blockTime: 1_764_000_000, transactions: [payment, token, failed] } };
        if (slot === 101) return { error: { code: -32007, message: 'Slot 101 was skipped, or missing due to ledger jump to recent snapshot' } };
        if (slot === 102) return { result: { blockhash: hashes[102], previousBlockhash: hashes[100], parentSlot: 100, blockHeight: 91, blockTime: 1_764_000_001, transactions: [] } };
        return { error: { code: -32004, message: `Block not available for slot ${String(slot)}` } };
      });
      node.recorded.set('getBlocks', ([start, end]) => ({ result: [99, 100].filter((slot) => slot >= (start as number) && slot <= (end as number)) }));
    });

    it('reads SOL and token transfers of successful transactions, and every payer with its fee and the blockhash that bounds its life', async () => {
      const block = (await provider.block(100))!;
      assert.equal(block.hash, hashes[100]);
      assert.equal(block.parentHash, hashes[99]);
      assert.deepEqual(block.time, new Date(1_764_000_000_000));
      assert.deepEqual(block.transfers, [
        { txid: 'SigSol1', position: 'ix:0', to: recipient.address, from: sender.address, assetId: 'SOL', amount: 1_500_000_000n },
        { txid: 'SigToken1', position: 'ix:1', to: recipient.address, from: sender.address, assetId: 'USDC_SOL', amount: 2_500_000n },
      ]);
      assert.deepEqual(block.payments, [
        { txid: 'SigSol1', from: sender.address, fee: 5_000n, recentBlockhash: hashes[99] },
        { txid: 'SigToken1', from: sender.address, fee: 15_000n, recentBlockhash: hashes[99] },
        { txid: 'SigFailed1', from: recipient.address, fee: 5_000n }, // durable nonce: no blockhash expires it
      ]);
    });

    it('reads a skipped slot as an empty block on the hash before it, so the chain of parent hashes holds; null where no block is yet', async () => {
      const [hundred, skipped, next] = [await provider.block(100), await provider.block(101), await provider.block(102)];
      assert.deepEqual(skipped, { height: 101, hash: hashes[100], parentHash: hashes[100], time: new Date(1_764_000_000_000), transfers: [], payments: [], inputs: [] });
      assert.equal(skipped!.parentHash, hundred!.hash);
      assert.equal(next!.parentHash, skipped!.hash);
      assert.equal(await provider.block(103), null);
    });
  });
});
