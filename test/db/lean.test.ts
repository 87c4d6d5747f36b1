import assert from 'node:assert/strict';
import { ReferenceKind } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiKey } from '../../src/api-keys/entities';
import { Card } from '../../src/cards/entities';
import { Vault, Wallet, WalletBalance } from '../../src/custody/entities';
import { postCustodyEntry } from '../../src/custody/journal';
import { findOneByColumns, readByColumns, readOneByColumns, readOneLocked, readOneWithChildren } from '../../src/db/lean';
import { Organization } from '../../src/organizations/entities';
import { pendingCard } from '../support/cards';
import { testOrm } from '../support/environment';

/** Every persisted property of `entity` as plain JSON, relations as their ids: what a presenter can read of it. */
function plain(em: EntityManager, entity: object, className: string): Record<string, unknown> {
  const meta = em.getMetadata().get(className);
  const values: Record<string, unknown> = {};
  for (const prop of meta.props) {
    if (prop.embedded || prop.kind === ReferenceKind.ONE_TO_MANY || prop.kind === ReferenceKind.MANY_TO_MANY) continue;
    const value = (entity as Record<string, unknown>)[prop.name];
    const reference = prop.kind === ReferenceKind.MANY_TO_ONE || prop.kind === ReferenceKind.ONE_TO_ONE;
    values[prop.name] = reference ? ((value as { id?: unknown } | null)?.id ?? null) : JSON.parse(JSON.stringify(value ?? null));
  }
  return values;
}

describe('Lean reads: detached copies of rows', () => {
  it('read each property as the entity manager hydrates it, and stay out of its identity map', async () => {
    const orm = await testOrm();
    const { org, card } = await pendingCard(0);
    // Nullable columns set, so that dates, decimals and the embedded secrets' optional parts are read too.
    await orm.em.fork().nativeUpdate(
      Card,
      { id: card.id },
      { name: 'Ada "Quote" \\ ünïcødé 😀\n', terminationRequestedAt: new Date('2026-03-01T10:20:30.456Z'), remainingBalance: '123456789012345678901234567', lastFour: '4242', webhookSecrets: { current: 'sealed-current', previous: 'sealed-previous', previousExpiresAt: new Date('2026-03-02T00:00:00.001Z') } },
    );
    const setup = orm.em.fork();
    const vault = setup.create(Vault, { organization: setup.getReference(Organization, org.organizationId), environment: 'sandbox', name: 'Lean vault', metadata: { team: 'ops' }, createdAt: new Date(), updatedAt: new Date() });
    const wallet = setup.create(Wallet, {
      organization: setup.getReference(Organization, org.organizationId), vault, environment: 'sandbox', name: 'Lean wallet', chain: 'ethereum', network: 'sepolia',
      walletType: 'hot', customerRefId: 'ref-1', metadata: { nested: { list: [1, 'two'] } }, accountIndex: 7, coinType: 1, nextAddressIndex: 0, createdAt: new Date(), updatedAt: new Date(),
    });
    await setup.flush();
    // Balance rows come from the custody journal (an address-less entry moves only the wallet's row).
    await orm.em.fork().transactional(async (tx) => {
      const opening = { walletId: wallet.id, addressId: null, kind: 'opening_balance', reference: { type: 'test_credit', id: wallet.id } } as const;
      await postCustodyEntry(tx, { ...opening, assetId: 'ETH', balance: 98765432109876543210987654321n, locked: 5n, pending: 7n });
      await postCustodyEntry(tx, { ...opening, assetId: 'USDC_ETH', balance: 1n });
    });

    const tenant = { organization: org.organizationId, environment: 'sandbox' as const };
    const cases: [string, () => Promise<object | null>, () => Promise<object | null>][] = [
      ['Card', () => findOneByColumns(orm.em.fork(), Card, { id: card.id, ...tenant }), () => readOneByColumns(orm.em.fork(), Card, { id: card.id, ...tenant })],
      ['ApiKey', () => findOneByColumns(orm.em.fork(), ApiKey, { id: org.apiKeyId }), () => readOneByColumns(orm.em.fork(), ApiKey, { id: org.apiKeyId })],
      ['Wallet', () => findOneByColumns(orm.em.fork(), Wallet, { id: wallet.id, ...tenant }), () => readOneByColumns(orm.em.fork(), Wallet, { id: wallet.id, ...tenant })],
    ];
    for (const [className, managed, detached] of cases) {
      const expected = await managed();
      const actual = await detached();
      assert.ok(expected && actual, className);
      assert.deepEqual(plain(orm.em, actual, className), plain(orm.em, expected, className), className);
    }
    // Omitted properties are neither selected nor set; every other one reads as before.
    const withoutSecrets = (await readOneByColumns(orm.em.fork(), Card, { id: card.id, ...tenant }, ['secrets', 'webhookSecrets']))!;
    assert.equal(withoutSecrets.secrets, undefined);
    assert.equal(withoutSecrets.webhookSecrets, undefined);
    const { secrets: _secrets, webhookSecrets: _webhook, ...others } = plain(orm.em, (await findOneByColumns(orm.em.fork(), Card, { id: card.id, ...tenant }))!, 'Card');
    const { secrets: _none, webhookSecrets: _noWebhook, ...read } = plain(orm.em, withoutSecrets, 'Card');
    assert.deepEqual(read, others);
    const detachedCard = (await readOneByColumns(orm.em.fork(), Card, { id: card.id, ...tenant }))!;
    assert.ok(detachedCard.terminationRequestedAt instanceof Date);
    assert.equal(detachedCard.name, 'Ada "Quote" \\ ünïcødé 😀\n');
    // Locked, the row reads the same (PostgreSQL hands it over as JSON text either way).
    const locked = await orm.em.fork().transactional((tx) => readOneLocked(tx, Card, { id: card.id }, ['secrets', 'webhookSecrets']));
    assert.deepEqual(plain(orm.em, locked!, 'Card'), plain(orm.em, withoutSecrets, 'Card'));
    assert.deepEqual(detachedCard.webhookSecrets, { current: 'sealed-current', previous: 'sealed-previous', previousExpiresAt: new Date('2026-03-02T00:00:00.001Z') });

    const em = orm.em.fork();
    const balances = await readByColumns(em, WalletBalance, { wallet: wallet.id });
    assert.deepEqual(balances.map((row) => [row.wallet.id, row.assetId, row.balance, row.locked, row.pending]).sort(), [
      [wallet.id, 'ETH', '98765432109876543210987654321', '5', '7'],
      [wallet.id, 'USDC_ETH', '1', '0', '0'],
    ]);
    // The wallet and its balance rows in one statement: the same values, numbers beyond 2^53 intact.
    const withBalances = (await readOneWithChildren(em, Wallet, { id: wallet.id, ...tenant }, { entity: WalletBalance, parentKey: 'wallet' }))!;
    assert.deepEqual(plain(orm.em, withBalances.row, 'Wallet'), plain(orm.em, (await findOneByColumns(orm.em.fork(), Wallet, { id: wallet.id, ...tenant }))!, 'Wallet'));
    assert.deepEqual(withBalances.children.map((row) => plain(orm.em, row, 'WalletBalance')).sort((a, b) => String(a.assetId).localeCompare(String(b.assetId))),
      balances.map((row) => plain(orm.em, row, 'WalletBalance')).sort((a, b) => String(a.assetId).localeCompare(String(b.assetId))));
    assert.ok(withBalances.children.every((row) => row.updatedAt instanceof Date));
    assert.equal(em.getUnitOfWork().getIdentityMap().values().length, 0);
    // A wallet with no balance rows reads with none; another organization's filter finds nothing.
    const bare = setup.create(Wallet, {
      organization: setup.getReference(Organization, org.organizationId), vault, environment: 'sandbox', name: 'Empty wallet', chain: 'ethereum', network: 'sepolia',
      walletType: 'hot', metadata: {}, accountIndex: 8, coinType: 1, nextAddressIndex: 0, createdAt: new Date(), updatedAt: new Date(),
    });
    await setup.flush();
    assert.deepEqual((await readOneWithChildren(em, Wallet, { id: bare.id, ...tenant }, { entity: WalletBalance, parentKey: 'wallet' }))?.children, []);
    assert.equal(await readOneWithChildren(em, Wallet, { id: wallet.id, organization: org.organizationId, environment: 'live' }, { entity: WalletBalance, parentKey: 'wallet' }), null);
    // Another organization's filter finds nothing.
    assert.equal(await readOneByColumns(orm.em.fork(), Card, { id: card.id, organization: (await pendingCard(0)).org.organizationId, environment: 'sandbox' }), null);
  });
});
