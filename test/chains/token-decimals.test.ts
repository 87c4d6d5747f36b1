import assert from 'node:assert/strict';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { Hex } from 'viem';
import { ChainNodes, ChainUnavailableError } from '../../src/chains/nodes';
import { createLogger } from '../../src/logger';
import { deployAnvilToken, startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp } from '../support/app';
import { testConfig, testOrm } from '../support/environment';

/**
 * Every amount of a token is counted in the catalogue's decimals, so a node whose token contract
 * reports others (a wrong address, a wrong deployment) must not serve the chain: its ERC-20 sends
 * would move a different sum than the one asked for.
 */
describe('Token contracts checked against the catalogue at start (anvil)', () => {
  let anvil: Anvil;
  /** A USDC stand-in as the catalogue has it (6 decimals), and one with OpenZeppelin's default 18. */
  let sixDecimals: Hex;
  let eighteenDecimals: Hex;
  const tokensConfig = (tokens: string) => ({ CHAIN_NODE_ETHEREUM_SANDBOX: anvil.url, CHAIN_TOKENS_ETHEREUM_SANDBOX: tokens });
  const tokenMismatch = (error: unknown) => error instanceof ChainUnavailableError && error.reason === 'token_mismatch';

  before(async () => {
    anvil = await startAnvil();
    sixDecimals = await deployAnvilToken(anvil);
    eighteenDecimals = await deployAnvilToken(anvil, 18);
  });
  after(async () => anvil?.stop());

  it("serves a node whose token contracts report the catalogue's decimals", async () => {
    const nodes = new ChainNodes(testConfig(tokensConfig(`USDC_ETH=${sixDecimals},USDT_ETH=${sixDecimals}`)), createLogger('silent'), await testOrm());
    const provider = await nodes.provider('ethereum', 'sandbox');
    assert.equal(provider.kind, 'evm-rpc');
    assert.equal(provider.tokenAddress('USDT_ETH'), sixDecimals);
  });

  it('checks a node outside database transactions: a first use inside one answers checking, starts the check, and the next use is served', async () => {
    const orm = await testOrm();
    const nodes = new ChainNodes(testConfig(tokensConfig(`USDC_ETH=${sixDecimals}`)), createLogger('silent'), orm);
    const checking = (error: unknown) => error instanceof ChainUnavailableError && error.reason === 'checking';
    await assert.rejects(
      orm.em.fork().transactional(() => nodes.provider('ethereum', 'sandbox')),
      checking,
    );
    // The check that refusal started runs outside the transaction; a use outside one waits for it.
    assert.equal((await nodes.provider('ethereum', 'sandbox')).kind, 'evm-rpc');
    const inside = await orm.em.fork().transactional(() => nodes.provider('ethereum', 'sandbox'));
    assert.equal(inside.tokenAddress('USDC_ETH'), sixDecimals, 'a checked node serves inside a transaction');
  });

  it('a contract with other decimals, or none, leaves the chain unavailable with one error line naming the token and both figures', async () => {
    const lines: { level: number; msg: string; problem?: string }[] = [];
    const log = createLogger('info', 'test', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const errorLines = () => lines.filter((line) => line.level >= 50);

    const nodes = new ChainNodes(testConfig(tokensConfig(`USDC_ETH=${sixDecimals},USDT_ETH=${eighteenDecimals}`)), log, await testOrm());
    await nodes.checkAll();
    assert.deepEqual(
      errorLines().map((line) => line.msg),
      [`ethereum sandbox node: the USDT_ETH contract ${eighteenDecimals} reports 18 decimals; the catalogue has 6; the chain is unavailable`],
    );
    await assert.rejects(nodes.provider('ethereum', 'sandbox'), tokenMismatch);
    await assert.rejects(nodes.provider('ethereum', 'sandbox'), tokenMismatch);
    assert.equal(errorLines().length, 1, 'remembered: not asked or logged again');

    const nobody = privateKeyToAccount(generatePrivateKey()).address;
    const noContract = new ChainNodes(testConfig(tokensConfig(`USDC_ETH=${nobody}`)), log, await testOrm());
    await assert.rejects(noContract.provider('ethereum', 'sandbox'), tokenMismatch);
    assert.equal(errorLines().at(-1)?.problem, `the USDC_ETH contract ${nobody} answers no decimals(); the catalogue has 6`);
  });

  it('through the API: Ethereum answers 503 chain_node_unavailable (token_mismatch), the other chains are served', async () => {
    const app = await startTestApp({ config: tokensConfig(`USDC_ETH=${eighteenDecimals}`) });
    try {
      await app.deps.chains.checkAll();
      const org = await createTestOrganization('Mismatched token');
      const ethereum = await app.request('GET', '/v1/chains/ethereum/fees', { key: org.secret });
      assert.equal(ethereum.status, 503, ethereum.text);
      assert.equal(ethereum.body.error.code, 'chain_node_unavailable');
      assert.equal(ethereum.body.error.details.reason, 'token_mismatch');
      assert.ok(!ethereum.text.includes(anvil.url), 'the node URL is not shown');
      const bitcoin = await app.request('GET', '/v1/chains/bitcoin/fees', { key: org.secret });
      assert.equal(bitcoin.status, 200, bitcoin.text);
    } finally {
      await app.close();
    }
  });
});
