import assert from 'node:assert/strict';
import { judgeBroadcastError } from '../../src/chains/refusals';

/**
 * What a node's error answer to a broadcast proves (src/chains/refusals.ts): only a definite refusal the
 * node itself answered releases a send's lock at its first handing; anything else is the node unavailable.
 */
describe('Broadcast errors: a definite refusal, the node holding the transaction, or nothing proven', () => {
  it('Ethereum: the pool and validator refusals of geth, reth and anvil are refusals; "already known" is held', () => {
    const cases: [string, string][] = [
      ['nonce too low: next nonce 5, tx nonce 4', 'nonce_too_low'],
      ['nonce too high', 'nonce_too_high'],
      ['insufficient funds for gas * price + value: balance 0', 'insufficient_funds'],
      ['replacement transaction underpriced', 'fee_too_low'],
      ['transaction underpriced: tip needed 1, tip permitted 0', 'fee_too_low'],
      ['max fee per gas less than block base fee: address 0x…, maxFeePerGas: 1, baseFee: 7', 'fee_too_low'],
      ['intrinsic gas too low: have 20000, want 21000', 'gas_limit'],
      ['invalid sender', 'invalid_signature'],
      ['only replay-protected (EIP-155) transactions allowed over RPC', 'invalid_signature'],
      ['transaction type not supported', 'malformed'],
      ['rlp: expected input list for types.LegacyTx', 'malformed'],
    ];
    for (const [message, reason] of cases) assert.deepEqual(judgeBroadcastError('ethereum', { code: -32000, message }, 200), { kind: 'refused', reason }, message);
    assert.deepEqual(judgeBroadcastError('ethereum', { code: -32000, message: 'already known' }, 200), { kind: 'held' });
  });

  it('Ethereum: an unknown message or code, a gateway status or an internal error proves nothing', () => {
    const unavailable = { kind: 'unavailable' };
    assert.deepEqual(judgeBroadcastError('ethereum', { code: -32000, message: 'header not found' }, 200), unavailable);
    assert.deepEqual(judgeBroadcastError('ethereum', { code: -32603, message: 'internal error' }, 200), unavailable);
    assert.deepEqual(judgeBroadcastError('ethereum', { code: -32005, message: 'rate limit exceeded' }, 200), unavailable);
    assert.deepEqual(judgeBroadcastError('ethereum', { code: -32000, message: 'nonce too low' }, 502), unavailable, "a gateway's body is not the node's verdict");
    assert.deepEqual(judgeBroadcastError('ethereum', { code: -32000, message: 'insufficient funds' }, 429), unavailable);
  });

  it('Bitcoin: -25 and -26 are refusals (their reason from the message), -27 and "already have" are held, -22 malformed, any other code nothing', () => {
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'min relay fee not met, 100 < 141' }, 500), { kind: 'refused', reason: 'fee_too_low' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'txn-mempool-conflict' }, 500), { kind: 'refused', reason: 'double_spend' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'dust' }, 500), { kind: 'refused', reason: 'dust_output' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -25, message: 'bad-txns-inputs-missingorspent' }, 500), { kind: 'refused', reason: 'double_spend' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -25, message: 'TX rejected: orphan transaction' }, 200), { kind: 'refused', reason: 'double_spend' }, 'btcd answers with HTTP 200');
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'TX rejected: something new' }, 200), { kind: 'refused', reason: 'rejected' }, 'the code is the verdict');
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -22, message: 'TX decode failed' }, 500), { kind: 'refused', reason: 'malformed' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -27, message: 'Transaction already in block chain' }, 500), { kind: 'held' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'txn-already-in-mempool' }, 500), { kind: 'held' });
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'TX rejected: already have transaction abc' }, 200), { kind: 'held' });
    const unavailable = { kind: 'unavailable' };
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -28, message: 'Loading block index...' }, 500), unavailable, 'a node warming up');
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -1, message: 'insufficient fee' }, 500), unavailable, 'an unknown code');
    assert.deepEqual(judgeBroadcastError('bitcoin', { code: -26, message: 'min relay fee not met' }, 502), unavailable, "a gateway's status");
  });

  it('Solana: a failed preflight (a blockhash the node does not know included) or signature is a refusal; an unhealthy node or an unknown code nothing', () => {
    assert.deepEqual(judgeBroadcastError('solana', { code: -32002, message: 'Transaction simulation failed: Attempt to debit an account but found no record of a prior credit.' }, 200), {
      kind: 'refused',
      reason: 'insufficient_funds',
    });
    assert.deepEqual(judgeBroadcastError('solana', { code: -32003, message: 'Transaction signature verification failure' }, 200), { kind: 'refused', reason: 'invalid_signature' });
    assert.deepEqual(judgeBroadcastError('solana', { code: -32602, message: 'failed to deserialize solana_sdk::transaction::versioned::VersionedTransaction' }, 200), { kind: 'refused', reason: 'malformed' });
    assert.deepEqual(judgeBroadcastError('solana', { code: -32002, message: 'Transaction simulation failed: This transaction has already been processed' }, 200), { kind: 'held' });
    assert.deepEqual(judgeBroadcastError('solana', { code: -32002, message: 'Transaction simulation failed: Blockhash not found' }, 200), { kind: 'refused', reason: 'rejected' });
    const unavailable = { kind: 'unavailable' };
    assert.deepEqual(judgeBroadcastError('solana', { code: -32004, message: 'Block not available for slot 5' }, 200), unavailable);
    assert.deepEqual(judgeBroadcastError('solana', { code: -32005, message: 'Node is unhealthy' }, 200), unavailable);
    assert.deepEqual(judgeBroadcastError('solana', { code: -32002, message: 'Transaction simulation failed' }, 503), unavailable);
  });
});
