import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS } from '../catalogue/service';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import type { Config } from '../config';
import { AddressBalance, Wallet, WalletBalance } from '../custody/entities';
import type { IncomingTransfer } from '../monitoring/entities';
import { Money, toDisplay } from '../shared/money';
import { ConsolidationRule } from './entities';
import { triggerRun } from './runs';

/** Threshold rules: a confirmed deposit that takes a rule's balance to its threshold triggers a run. */

/** The ledger balances (base units) of `assetIds` held by `wallets` (or by one address of them), summed per asset. */
async function ledgerTotals(em: EntityManager, holders: { wallets: string[] } | { address: string }, assetIds: string[]): Promise<Map<string, bigint>> {
  const totals = new Map<string, bigint>(assetIds.map((id) => [id, 0n]));
  if ('wallets' in holders && !holders.wallets.length) return totals;
  const rows =
    'address' in holders
      ? await em.find(AddressBalance, { address: holders.address, assetId: { $in: assetIds } })
      : await em.find(WalletBalance, { wallet: { $in: holders.wallets }, assetId: { $in: assetIds } });
  for (const row of rows) totals.set(row.assetId, (totals.get(row.assetId) ?? 0n) + BigInt(row.balance));
  return totals;
}

/** Whether the balances reach the rule's threshold: the assets together in USD (unpriced ones count for nothing), or any one asset in its display units. */
function reachesThreshold(rule: ConsolidationRule, totals: Map<string, bigint>, config: Config): boolean {
  const threshold = new Money(rule.thresholdValue!);
  const assets = rule.assets.map((asset) => ({ asset: ASSETS.find((candidate) => candidate.id === asset.asset_id)!, balance: totals.get(asset.asset_id) ?? 0n }));
  if (rule.thresholdCurrency === 'token') return assets.some(({ asset, balance }) => new Money(toDisplay(balance, asset.decimals)).gte(threshold));
  const prices = priceSourceFor(config, rule.environment);
  const total = assets.reduce((sum, { asset, balance }) => sum.plus(usdValue(prices, asset, balance) ?? '0'), new Money(0));
  return total.gte(threshold);
}

/**
 * The threshold hook, called in the transaction that credits confirmed deposits: for each deposit
 * to an address of a wallet in a vault with enabled threshold rules on its chain that sweep its
 * asset, the rule's balance (aggregate: the vault's wallets on the chain; per_address: the
 * deposit's address, on Bitcoin its wallet, whose coins the ledger keeps per wallet) is compared with the threshold once the
 * deposit is credited; at or above it, triggerRun (source threshold, detail the deposit id). Two
 * deposits racing still make one run: triggerRun's row lock records the second on the first's run.
 */
export async function triggerThresholdRules(em: EntityManager, config: Config, deposits: IncomingTransfer[]): Promise<void> {
  for (const deposit of deposits) {
    if (!deposit.wallet || deposit.status !== 'confirmed') continue;
    const wallet = await em.findOneOrFail(Wallet, { id: deposit.wallet.id });
    const rules = await em.find(ConsolidationRule, { vault: wallet.vault.id, chain: deposit.chain, environment: deposit.environment, enabled: true, deletedAt: null, triggerType: 'threshold' });
    for (const rule of rules) {
      if (!rule.assets.some((asset) => asset.asset_id === deposit.assetId)) continue;
      const holders =
        rule.thresholdBasis === 'per_address'
          ? deposit.chain === 'bitcoin' || !deposit.address
            ? { wallets: [wallet.id] }
            : { address: deposit.address.id }
          : { wallets: (await em.find(Wallet, { vault: rule.vault.id, chain: rule.chain }, { fields: ['id'] })).map((candidate) => candidate.id) };
      const totals = await ledgerTotals(em, holders, rule.assets.map((asset) => asset.asset_id));
      if (reachesThreshold(rule, totals, config)) await triggerRun(em, rule.id, { source: 'threshold', detail: deposit.id });
    }
  }
}
