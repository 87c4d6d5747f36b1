import { Migration } from '@mikro-orm/migrations';

const NAME = 'Migration20261129200001';

/**
 * Issue 48, cards in the double-entry ledger: each card's `balance` and `held` become projections of
 * its `card:<id>:usd:available|held` accounts (src/cards/ledger.ts). Cards moved before their
 * movements were posted, so each card whose row differs from its accounts' sums (every card with
 * money, when this runs) gets one opening posting against its organization's `opening_balances`,
 * as the custody and company journals' history was opened (Migration20261129100001). Running it
 * again posts nothing: the key is taken, and the rows then equal their sums.
 */
export class Migration20261129200001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create temporary table card_openings as
      select card_id, organization_id, environment, available, held from (
        select c.id::text as card_id, c.organization_id::text as organization_id, c.environment,
               c.balance - c.held - coalesce((select sum(l.amount) from ledger_lines l where l.account_key = 'card:' || c.id || ':usd:available'), 0) as available,
               c.held - coalesce((select sum(l.amount) from ledger_lines l where l.account_key = 'card:' || c.id || ':usd:held'), 0) as held
          from cards c
      ) o where available <> 0 or held <> 0`);
    this.addSql(`insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
      select 'card:' || o.card_id || ':usd:' || s.state, o.environment, o.organization_id, 'usd', 'card_' || s.state, o.card_id, now()
        from card_openings o cross join (values ('available'), ('held')) s(state)
       order by 1 on conflict (key) do nothing`);
    this.addSql(`insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
      select distinct 'opening_balances:' || o.organization_id || ':' || o.environment || ':usd', o.environment, o.organization_id, 'usd', 'opening_balances', null::text, now()
        from card_openings o on conflict (key) do nothing`);
    // Lines only for the postings written here: a key taken before keeps its lines as they are.
    this.addSql(`with postings as (
        insert into ledger_postings (id, key, environment, organization_id, kind, reference_type, reference_id, created_at)
        select 'lpst_card_opening_' || o.card_id, 'card/' || o.card_id || '/opening_balance/migration/${NAME}', o.environment, o.organization_id, 'opening_balance', 'migration', '${NAME}', now()
          from card_openings o on conflict (key) do nothing returning id, key
      )
      insert into ledger_lines (posting_id, account_key, amount)
      select p.id, l.account_key, l.amount
        from card_openings o join postings p on p.key = 'card/' || o.card_id || '/opening_balance/migration/${NAME}'
       cross join lateral (values ('card:' || o.card_id || ':usd:available', o.available), ('card:' || o.card_id || ':usd:held', o.held),
                                  ('opening_balances:' || o.organization_id || ':' || o.environment || ':usd', -(o.available + o.held))) l(account_key, amount)
       where l.amount <> 0`);
    this.addSql('drop table card_openings');
  }

  override async down(): Promise<void> {
    // The ledger is append-only, and the opening postings stay true of the cards: nothing to undo.
  }
}
