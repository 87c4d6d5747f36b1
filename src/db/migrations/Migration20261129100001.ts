import { Migration } from '@mikro-orm/migrations';

/** The holder account of a custody journal entry in one state, as src/ledger/accounts.ts names it. */
const custodyKey = (state: string) => `'custody:' || coalesce(e.address_id, e.wallet_id) || ':' || e.asset_id || ':${state}'`;
/** The counterparty of a custody entry by its kind (src/custody/journal.ts COUNTERPARTY). */
const custodyCounterparty = `case e.kind when 'opening_balance' then 'opening_balances' when 'fee_debit' then 'network_fees' else 'world' end`;
/** The counterparty of a company-balance entry by what moved it (src/balances/service.ts COUNTERPARTY_OF). */
const companyCounterparty = `case when e.reference_type like 'card\\_%' then 'card_issuer' when e.reference_type like 'lightning\\_%' then 'lightning_network'
  when e.reference_type like 'payout\\_%' then 'payout_desk' when e.reference_type = 'sandbox_credit' then 'sandbox_faucet' else 'world' end`;
const companyKey = (state: string) => `'company:' || e.organization_id || ':' || e.environment || ':' || e.currency || ':${state}'`;

/**
 * Issue 48: the double-entry ledger (src/ledger/). Accounts, balanced postings and their lines
 * replace the single-entry custody journal and company-balance journal: every existing entry becomes
 * a posting whose lines sum to zero per asset (the holder's states against the counterparty its kind
 * or reference names), under the same idempotency key. PostgreSQL then holds the rules: lines,
 * postings and accounts are insert-only (UPDATE, DELETE and TRUNCATE are refused), nothing cascades
 * into them, a line is never zero, and a deferred constraint trigger refuses to commit a posting
 * that does not balance per asset or that names another organization's or environment's account.
 * The old tables' names stay as read-only views over the ledger, one row per posting and holder.
 * One-way: the history cannot be written back as single entries without losing what it now proves.
 */
export class Migration20261129100001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "ledger_accounts" ("key" text not null, "environment" "environment" not null, "organization_id" text not null, "asset" text not null, "type" text not null, "holder_id" text null, "created_at" timestamptz not null, constraint "ledger_accounts_pkey" primary key ("key"));`);
    this.addSql(`create index "ledger_accounts_holder_id_index" on "ledger_accounts" ("holder_id");`);
    this.addSql(`create index "ledger_accounts_organization_id_environment_type_index" on "ledger_accounts" ("organization_id", "environment", "type");`);

    this.addSql(`create table "ledger_invariant_checks" ("id" text not null default 'latest', "checked_at" timestamptz not null, "violations" int not null, "duration_ms" int not null, constraint "ledger_invariant_checks_pkey" primary key ("id"));`);

    this.addSql(`create table "ledger_postings" ("id" text not null, "key" text not null, "environment" "environment" not null, "organization_id" text not null, "kind" text not null, "reference_type" text not null, "reference_id" text not null, "created_at" timestamptz not null, constraint "ledger_postings_pkey" primary key ("id"));`);
    this.addSql(`alter table "ledger_postings" add constraint "ledger_postings_key_unique" unique ("key");`);
    this.addSql(`create index "ledger_postings_reference_type_reference_id_index" on "ledger_postings" ("reference_type", "reference_id");`);
    this.addSql(`create index "ledger_postings_organization_id_environment_created_at_index" on "ledger_postings" ("organization_id", "environment", "created_at");`);

    this.addSql(`create table "ledger_lines" ("id" bigserial primary key, "posting_id" text not null, "account_key" text not null, "amount" numeric(78,0) not null, constraint ledger_lines_amount_check check (amount <> 0));`);
    this.addSql(`create index "ledger_lines_account_key_index" on "ledger_lines" ("account_key");`);
    this.addSql(`create index "ledger_lines_posting_id_index" on "ledger_lines" ("posting_id");`);

    this.addSql(`alter table "ledger_lines" add constraint "ledger_lines_posting_id_foreign" foreign key ("posting_id") references "ledger_postings" ("id") on update cascade on delete restrict;`);
    this.addSql(`alter table "ledger_lines" add constraint "ledger_lines_account_key_foreign" foreign key ("account_key") references "ledger_accounts" ("key") on update cascade on delete restrict;`);

    // Every custody journal entry, a posting of its own under the journal's idempotency key.
    this.addSql(`insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
      select distinct 'custody:' || coalesce(e.address_id, e.wallet_id) || ':' || e.asset_id || ':' || s.state, w.environment, w.organization_id::text, e.asset_id,
             'custody_' || s.state, coalesce(e.address_id, e.wallet_id)::text, now()
        from custody_journal_entries e join wallets w on w.id = e.wallet_id cross join (values ('available'), ('locked'), ('pending')) s(state)`);
    this.addSql(`insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
      select distinct ${custodyCounterparty} || ':' || w.organization_id || ':' || w.environment || ':' || e.asset_id, w.environment, w.organization_id::text, e.asset_id, ${custodyCounterparty}, null::text, now()
        from custody_journal_entries e join wallets w on w.id = e.wallet_id`);
    this.addSql(`insert into ledger_postings (id, key, environment, organization_id, kind, reference_type, reference_id, created_at)
      select e.id, 'custody/' || e.wallet_id || '/' || e.asset_id || '/' || e.kind || '/' || e.reference_type || '/' || e.reference_id, w.environment, w.organization_id::text,
             e.kind, e.reference_type, e.reference_id, e.created_at
        from custody_journal_entries e join wallets w on w.id = e.wallet_id`);
    this.addSql(`insert into ledger_lines (posting_id, account_key, amount)
      select e.id, l.account_key, l.amount
        from custody_journal_entries e join wallets w on w.id = e.wallet_id
       cross join lateral (values (${custodyKey('available')}, e.balance - e.locked), (${custodyKey('locked')}, e.locked), (${custodyKey('pending')}, e.pending),
                                  (${custodyCounterparty} || ':' || w.organization_id || ':' || w.environment || ':' || e.asset_id, -(e.balance + e.pending))) l(account_key, amount)
       where l.amount <> 0 order by e.created_at, e.id`);

    // Every company-balance entry likewise: its states against the rail its reference names.
    this.addSql(`insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
      select distinct 'company:' || e.organization_id || ':' || e.environment || ':' || e.currency || ':' || s.state, e.environment, e.organization_id::text, e.currency::text, 'company_' || s.state, null::text, now()
        from company_balance_entries e cross join (values ('available'), ('reserved')) s(state)`);
    this.addSql(`insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
      select distinct ${companyCounterparty} || ':' || e.organization_id || ':' || e.environment || ':' || e.currency, e.environment, e.organization_id::text, e.currency::text, ${companyCounterparty}, null::text, now()
        from company_balance_entries e on conflict (key) do nothing`);
    this.addSql(`insert into ledger_postings (id, key, environment, organization_id, kind, reference_type, reference_id, created_at)
      select e.id, 'company/' || e.organization_id || '/' || e.environment || '/' || e.currency || '/' || e.kind || '/' || e.reference_type || '/' || e.reference_id,
             e.environment, e.organization_id::text, e.kind::text, e.reference_type, e.reference_id, e.created_at
        from company_balance_entries e`);
    this.addSql(`insert into ledger_lines (posting_id, account_key, amount)
      select e.id, l.account_key, l.amount
        from company_balance_entries e
       cross join lateral (values
         (${companyKey('available')}, case e.kind when 'credit' then e.amount when 'release' then e.amount when 'debit' then -e.amount when 'reserve' then -e.amount else 0 end),
         (${companyKey('reserved')}, case e.kind when 'reserve' then e.amount when 'release' then -e.amount when 'capture' then -e.amount else 0 end),
         (${companyCounterparty} || ':' || e.organization_id || ':' || e.environment || ':' || e.currency,
          case e.kind when 'credit' then -e.amount when 'debit' then e.amount when 'capture' then e.amount else 0 end)) l(account_key, amount)
       where l.amount <> 0 order by e.created_at, e.id`);

    this.addSql('drop table "company_balance_entries"');
    this.addSql('drop table "custody_journal_entries"');
    this.addSql('drop type "balance_entry_kind"');

    // Append-only: what the ledger wrote stays written.
    this.addSql(`create function ledger_refuse_change() returns trigger language plpgsql as $$
      begin
        raise exception 'the ledger is append-only: % on % is refused', tg_op, tg_table_name using errcode = 'restrict_violation';
      end $$`);
    for (const table of ['ledger_accounts', 'ledger_postings', 'ledger_lines']) {
      this.addSql(`create trigger ${table}_append_only before update or delete on "${table}" for each row execute function ledger_refuse_change()`);
      this.addSql(`create trigger ${table}_no_truncate before truncate on "${table}" for each statement execute function ledger_refuse_change()`);
    }
    // Balanced, within one organization and environment: checked when the transaction commits, once all its lines are in.
    this.addSql(`create function ledger_posting_balanced() returns trigger language plpgsql as $$
      declare
        unbalanced record;
      begin
        select a.asset, sum(l.amount) as total into unbalanced
          from ledger_lines l join ledger_accounts a on a.key = l.account_key
         where l.posting_id = new.posting_id group by a.asset having sum(l.amount) <> 0 limit 1;
        if found then
          raise exception 'ledger posting % does not balance: % sums to %', new.posting_id, unbalanced.asset, unbalanced.total using errcode = 'check_violation';
        end if;
        if exists (select 1 from ledger_accounts a, ledger_postings p
                    where a.key = new.account_key and p.id = new.posting_id and (a.organization_id <> p.organization_id or a.environment <> p.environment)) then
          raise exception 'ledger posting % moves % of another organization or environment', new.posting_id, new.account_key using errcode = 'check_violation';
        end if;
        return null;
      end $$`);
    this.addSql(`create constraint trigger ledger_lines_balanced after insert on "ledger_lines" deferrable initially deferred
      for each row execute function ledger_posting_balanced()`);

    // The journals' old names, as read-only views: one row per posting and holder (custody), per posting (company balances).
    this.addSql(`create view custody_journal_entries as
      select p.id, coalesce(ad.wallet_id, a.holder_id::uuid) as wallet_id, ad.id as address_id, a.asset as asset_id, p.kind, p.reference_type, p.reference_id,
             coalesce(sum(l.amount) filter (where a.type in ('custody_available', 'custody_locked')), 0) as balance,
             coalesce(sum(l.amount) filter (where a.type = 'custody_locked'), 0) as locked,
             coalesce(sum(l.amount) filter (where a.type = 'custody_pending'), 0) as pending,
             p.created_at
        from ledger_postings p join ledger_lines l on l.posting_id = p.id join ledger_accounts a on a.key = l.account_key
        left join addresses ad on ad.id = a.holder_id::uuid
       where a.type in ('custody_available', 'custody_locked', 'custody_pending')
       group by p.id, a.holder_id, ad.id, ad.wallet_id, a.asset`);
    this.addSql(`create view company_balance_entries as
      select p.id, p.organization_id::uuid as organization_id, p.environment, a.asset as currency, p.kind, max(abs(l.amount)) as amount, p.reference_type, p.reference_id, p.created_at
        from ledger_postings p join ledger_lines l on l.posting_id = p.id join ledger_accounts a on a.key = l.account_key
       where a.type in ('company_available', 'company_reserved')
       group by p.id, a.asset`);
  }

  override async down(): Promise<void> {
    throw new Error('Migration20261129100001 is one-way: the double-entry ledger cannot be written back as single entries without losing what it proves');
  }
}
