import assert from 'node:assert/strict';
import { secp256k1 } from '@noble/curves/secp256k1';
import { base64, hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { Organization } from '../../src/organizations/entities';
import { PolicyAuditLog } from '../../src/policies/entities';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { testOrm } from '../support/environment';

const NETWORK = btc.TEST_NETWORK;
const someone = () => btc.p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomPrivateKey(), true), NETWORK).address!;

/**
 * A Bitcoin wallet signs one input of a PSBT (hash_function psbt), judged by what the PSBT pays: the
 * outputs to addresses other than the wallet's own are its destination and amount. The signature
 * returned is over the input's BIP-143 sighash and finalizes the PSBT into a spend that verifies.
 */
describe('Signing Bitcoin PSBTs under enforced policies', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  async function organization() {
    const org = await createTestOrganization('PSBT signing', 'sandbox');
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: org.organizationId }, { policyActivationRequiredApprovals: 0 });
    const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
    const vault = await call('POST', '/v1/vaults', { name: 'Treasury' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Bitcoin', chain: 'bitcoin', vault_id: vault.body.id });
    assert.equal(wallet.status, 201, wallet.text);
    const enforce = async (rules: unknown[]) => {
      const policy = await call('POST', '/v1/policies', { name: 'PSBTs', rules });
      assert.equal(policy.status, 201, policy.text);
      assert.equal((await call('POST', `/v1/policies/${policy.body.id}/activate`, {})).status, 200);
      return policy.body.rules.map((rule: { id: string }) => rule.id) as string[];
    };
    const sign = (body: Record<string, unknown>) => call('POST', `/v1/wallets/${wallet.body.id}/sign`, body);
    const lastRequest = async () => {
      const [decision] = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, action: 'decision' }, { orderBy: { createdAt: 'desc' }, limit: 1 });
      return (decision!.metadata as { request: Record<string, unknown> }).request;
    };
    return { call, enforce, sign, lastRequest, address: wallet.body.primary_address.address as string };
  }

  /** A PSBT spending 100 000 sats of `from` (input 0) to `outputs`. */
  function psbt(from: string, outputs: [string, bigint][]) {
    const tx = new btc.Transaction();
    tx.addInput({ txid: 'ab'.repeat(32), index: 1, witnessUtxo: { script: btc.OutScript.encode(btc.Address(NETWORK).decode(from)), amount: 100_000n } });
    outputs.forEach(([address, amount]) => tx.addOutputAddress(address, amount, NETWORK));
    return tx;
  }
  const signPsbt = (sign: (body: Record<string, unknown>) => ReturnType<TestApp['request']>, tx: btc.Transaction) =>
    sign({ payload: hex.encode(tx.toPSBT()), hash_function: 'psbt', input_index: 0 });

  const refusedBy = (response: { status: number; text: string; body: any }, status: number, code: string, ruleId: string | null) => {
    assert.equal(response.status, status, response.text);
    assert.equal(response.body.error.code, code);
    assert.equal(response.body.error.details.rule_id, ruleId);
  };

  it('judges a PSBT by the external address it pays and the amount: blocked by to_address and amount rules, allowed by address book; the signature finalizes a spend that verifies', async () => {
    const { call, enforce, sign, lastRequest, address } = await organization();
    const watched = someone();
    const exchange = someone();
    assert.equal((await call('POST', '/v1/address-book', { chain: 'bitcoin', address: exchange, label: 'Exchange' })).status, 201);
    const [blockWatched, , tooMuch] = await enforce([
      { name: 'Watched', action_type: 'block', conditions: [{ field: 'to_address', operator: 'equal', value: watched }] },
      { name: 'Known payees', action_type: 'allow', conditions: [{ field: 'to_address', operator: 'in_address_book' }] },
      { name: 'Over 0.0005 BTC', action_type: 'block', conditions: [{ field: 'asset_symbol', operator: 'equal', value: 'BTC' }, { field: 'amount', operator: 'greater_than', value: '0.0005' }] },
      { name: 'The rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
    ]);

    refusedBy(await signPsbt(sign, psbt(address, [[watched, 10_000n], [address, 89_000n]])), 403, 'policy_blocked', blockWatched!);
    refusedBy(await signPsbt(sign, psbt(address, [[someone(), 60_000n], [address, 39_000n]])), 403, 'policy_blocked', tooMuch!);
    const judged = await lastRequest();
    assert.deepEqual(
      [judged.operation_type, judged.tx_type, judged.destination_type, judged.asset_symbol, judged.amount, judged.fee_raw],
      ['sign', 'transaction_signature', 'one_time_address', 'BTC', '0.0006', '1000'],
    );
    // Two payees: the destination is unknown, which a block rule's to_address condition takes to match (fail closed), and the total paid out is judged.
    refusedBy(await signPsbt(sign, psbt(address, [[exchange, 30_000n], [someone(), 30_000n], [address, 39_000n]])), 403, 'policy_blocked', blockWatched!);
    const twoPayees = await lastRequest();
    assert.deepEqual([twoPayees.destination_type, twoPayees.amount], ['unknown', '0.0006']);

    const tx = psbt(address, [[exchange, 60_000n], [address, 39_000n]]);
    const signed = await signPsbt(sign, tx);
    assert.equal(signed.status, 200, signed.text);
    assert.equal(signed.body.hash_function, 'psbt');
    assert.equal((await lastRequest()).destination_type, 'address_book');
    const publicKey = hex.decode(signed.body.public_key);
    const der = secp256k1.Signature.fromCompact(signed.body.r + signed.body.s).toDERRawBytes();
    tx.updateInput(0, { partialSig: [[publicKey, Uint8Array.of(...der, btc.SigHash.ALL)]] });
    tx.finalize();
    const spend = btc.Transaction.fromRaw(tx.extract(), { allowUnknownOutputs: true });
    const [signature, witnessKey] = spend.getInput(0).finalScriptWitness!;
    const sighash = spend.preimageWitnessV0(0, btc.p2pkh(witnessKey!).script, btc.SigHash.ALL, 100_000n);
    assert.equal(signed.body.signed_payload, hex.encode(sighash));
    assert.ok(secp256k1.verify(secp256k1.Signature.fromDER(signature!.slice(0, -1)), sighash, witnessKey!));
  });

  it('takes a PSBT paying the wallet itself as a move to the vault, and its base64 text', async () => {
    const { enforce, sign, lastRequest, address } = await organization();
    await enforce([
      { name: 'Own', action_type: 'allow', conditions: [{ field: 'destination_type', operator: 'equal', value: 'vault' }] },
      { name: 'Else', action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
    ]);
    const signed = await sign({ payload: base64.encode(psbt(address, [[address, 99_000n]]).toPSBT()), payload_encoding: 'text_utf8', hash_function: 'psbt', input_index: 0 });
    assert.equal(signed.status, 200, signed.text);
    const judged = await lastRequest();
    assert.deepEqual([judged.to_address, judged.destination_type, judged.amount], [address, 'vault', '0.00099']);
  });

  it('refuses input_index without psbt, psbt without input_index, an index past the inputs, and an input the wallet does not own (400)', async () => {
    const { sign, address } = await organization();
    const payload = hex.encode(psbt(address, [[someone(), 10_000n]]).toPSBT());
    const stranger = hex.encode(psbt(someone(), [[someone(), 10_000n]]).toPSBT());
    for (const body of [
      { payload, hash_function: 'psbt' },
      { payload: 'ab'.repeat(32), hash_function: 'sha256', input_index: 0 },
      { payload, hash_function: 'psbt', input_index: 1 },
      { payload, hash_function: 'psbt', input_index: -1 },
      { payload: stranger, hash_function: 'psbt', input_index: 0 },
    ]) {
      const response = await sign(body);
      assert.equal(response.status, 400, `${JSON.stringify(body)}: ${response.text}`);
      assert.equal(response.body.error.param, 'input_index');
    }
    const notPsbt = await sign({ payload: 'ab'.repeat(32), hash_function: 'psbt', input_index: 0 });
    assert.equal(notPsbt.status, 400, notPsbt.text);
    assert.equal(notPsbt.body.error.param, 'payload');
  });
});
