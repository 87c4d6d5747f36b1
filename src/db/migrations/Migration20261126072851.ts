import { Migration } from '@mikro-orm/migrations';

/**
 * The custody journal (issue 31, part 1): every change to a wallet's balance, lock or pending amount
 * is an entry, and the balance rows are its sums; on account-based chains each address has its own
 * row. Existing ledgers open with one `opening_balance` entry per address and asset: what its
 * deposits, settled sends and open locks say it holds, the rest of its wallet's row on the wallet's
 * primary address, so every wallet row is unchanged and equals its journal. Bitcoin wallets open
 * with one entry per wallet row (their coins are in wallet_outputs).
 */
export class Migration20261126072851 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "custody_journal_entries" ("id" text not null, "wallet_id" uuid not null, "address_id" uuid null, "asset_id" text not null, "kind" text not null, "reference_type" text not null, "reference_id" text not null, "balance" numeric(78,0) not null default 0, "locked" numeric(78,0) not null default 0, "pending" numeric(78,0) not null default 0, "created_at" timestamptz not null, constraint "custody_journal_entries_pkey" primary key ("id"));`);
    this.addSql(`create index "custody_journal_entries_wallet_id_created_at_id_index" on "custody_journal_entries" ("wallet_id", "created_at", "id");`);
    this.addSql(`alter table "custody_journal_entries" add constraint "custody_journal_entries_wallet_id_asset_id_kind_r_a1d40_unique" unique ("wallet_id", "asset_id", "kind", "reference_type", "reference_id");`);

    this.addSql(`create table "address_balances" ("address_id" uuid not null, "asset_id" text not null, "wallet_id" uuid not null, "balance" numeric(78,0) not null default 0, "locked" numeric(78,0) not null default 0, "pending" numeric(78,0) not null default 0, "updated_at" timestamptz not null, constraint "address_balances_pkey" primary key ("address_id", "asset_id"));`);

    this.addSql(`alter table "custody_journal_entries" add constraint "custody_journal_entries_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "custody_journal_entries" add constraint "custody_journal_entries_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "address_balances" add constraint "address_balances_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "address_balances" add constraint "address_balances_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);

    this.addSql(`create temporary table "custody_opening" as
      with natives (chain, asset_id) as (values ('ethereum', 'ETH'), ('tron', 'TRX'), ('solana', 'SOL')),
      positions (wallet_id, address_id, asset_id, balance, locked, pending) as (
        select t.wallet_id, t.address_id, t.asset_id,
               case when t.status = 'confirmed' then t.amount else 0 end, 0, case when t.status = 'pending' then t.amount else 0 end
          from "incoming_transfers" t where t.wallet_id is not null and t.address_id is not null and t.chain <> 'bitcoin'
        union all
        select s.wallet_id, s.from_address_id, s.asset_id,
               case when s.status = 'confirmed' then -s.recipient_amount else 0 end,
               case when s.status not in ('confirmed', 'failed') then s.locked_amount else 0 end, 0
          from "transactions" s where s.chain <> 'bitcoin'
        union all
        select s.wallet_id, s.from_address_id, n.asset_id,
               case when s.status = 'confirmed' or (s.status = 'failed' and s.failure_reason = 'reverted') then -coalesce(s.fee, 0) else 0 end,
               case when s.status not in ('confirmed', 'failed') then s.locked_fee else 0 end, 0
          from "transactions" s join natives n on n.chain = s.chain
      ),
      derived as (
        select wallet_id, address_id, asset_id, sum(balance) as balance, sum(locked) as locked, sum(pending) as pending
          from positions group by wallet_id, address_id, asset_id
      ),
      remainder as (
        select b.wallet_id, a.id as address_id, b.asset_id,
               b.balance - coalesce(sum(d.balance), 0) as balance, b.locked - coalesce(sum(d.locked), 0) as locked, b.pending - coalesce(sum(d.pending), 0) as pending
          from "wallet_balances" b join "wallets" w on w.id = b.wallet_id and w.chain <> 'bitcoin'
          join "addresses" a on a.wallet_id = b.wallet_id and a.is_primary
          left join derived d on d.wallet_id = b.wallet_id and d.asset_id = b.asset_id
         group by b.wallet_id, a.id, b.asset_id, b.balance, b.locked, b.pending
      )
      select wallet_id, address_id, asset_id, sum(balance) as balance, sum(locked) as locked, sum(pending) as pending
        from (select * from derived union all select * from remainder) per_address
       group by wallet_id, address_id, asset_id
      union all
      select b.wallet_id, null, b.asset_id, b.balance, b.locked, b.pending
        from "wallet_balances" b join "wallets" w on w.id = b.wallet_id and w.chain = 'bitcoin';`);
    this.addSql(`insert into "custody_journal_entries" ("id", "wallet_id", "address_id", "asset_id", "kind", "reference_type", "reference_id", "balance", "locked", "pending", "created_at")
      select 'cje_' || substr(md5(random()::text || clock_timestamp()::text || wallet_id::text || coalesce(address_id::text, '') || asset_id), 1, 16), wallet_id, address_id, asset_id, 'opening_balance',
             'migration', 'Migration20261126072851:' || coalesce(address_id::text, wallet_id::text), balance, locked, pending, now()
        from "custody_opening" where balance <> 0 or locked <> 0 or pending <> 0;`);
    this.addSql(`insert into "address_balances" ("address_id", "asset_id", "wallet_id", "balance", "locked", "pending", "updated_at")
      select address_id, asset_id, wallet_id, balance, locked, pending, now() from "custody_opening" where address_id is not null and (balance <> 0 or locked <> 0 or pending <> 0);`);
    this.addSql(`drop table "custody_opening";`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "custody_journal_entries" cascade;`);
    this.addSql(`drop table if exists "address_balances" cascade;`);
  }
}
