import type { EntityManager } from '@mikro-orm/postgresql';
import { type Orm } from '../../../src/db/orm';
import { companyAccount, counterpartyAccount } from '../../../src/ledger/accounts';
import { post } from '../../../src/ledger/postings';
import { type SandboxOrganization } from '../sandbox-organizations';
import { Operation } from './client';
import { FUNDING_FEE_BPS, INITIAL_CARD_FUNDING, ORGANIZATIONS, OrganizationName } from './model';

/** Cents charged on a card funding, as the service's fee schedule says (CARD_FUNDING_FEE_BPS, rounded down): recomputed, never read back. */
const fundingFee = (cents: bigint) => (cents * BigInt(FUNDING_FEE_BPS)) / 10_000n;

/** What each organization must hold after the load, from the operations it got a 2xx for alone. */
interface ExpectedState {
  /** Company balances (available + reserved, nothing reserved once settled), per organization, in the API's currencies. */
  balances: Record<OrganizationName, Record<'USD' | 'BTC' | 'USDT', bigint>>;
  /** Each card's balance: its initial funding and each accepted funding. */
  cards: Map<string, { as: OrganizationName; cents: bigint }>;
}

/**
 * The model: sandbox credits add to their organization; a card takes its initial funding and each funding takes its
 * amount, each plus the fee the schedule charges, from its organization's USD; a Lightning payment takes the invoice's
 * sats from the payer (the internal route charges no fee) and gives them to the invoice's organization; payout trips are
 * funded from outside and pay exactly their quote (nothing credited back to USDT).
 */
export function expectedState(accepted: Operation[]): ExpectedState {
  const balances = Object.fromEntries(ORGANIZATIONS.map((name) => [name, { USD: 0n, BTC: 0n, USDT: 0n }])) as ExpectedState['balances'];
  const cards: ExpectedState['cards'] = new Map();
  for (const operation of accepted) {
    if (operation.kind === 'credit') {
      const body = operation.body as { amount: string; currency: string };
      balances[operation.as][body.currency === 'USD' ? 'USD' : 'BTC'] += BigInt(body.amount);
    } else if (operation.kind === 'card') {
      balances[operation.as].USD -= BigInt(INITIAL_CARD_FUNDING) + fundingFee(BigInt(INITIAL_CARD_FUNDING));
      cards.set(operation.id!, { as: operation.as, cents: BigInt(INITIAL_CARD_FUNDING) });
    } else if (operation.kind === 'funding') {
      const cents = BigInt((operation.body as { amount: number }).amount);
      balances[operation.as].USD -= cents + fundingFee(cents);
      const card = cards.get(operation.cardId!)!;
      card.cents += cents;
    } else if (operation.kind === 'payment') {
      balances[operation.as].BTC -= operation.pays!.sats;
      balances[operation.pays!.organization].BTC += operation.pays!.sats;
    }
  }
  return { balances, cards };
}

/**
 * The driver's own faults, for the test that shows the checks catch them (never a path of the service). The ledger
 * refuses a changed or deleted line, so each fault is a balanced posting the business never made, its balance row
 * moved to match (the ledger's invariants still hold; only the money checks can tell): a sats credit doubled (one
 * organization's first sandbox credit posted again) and a debit skipped (a completed card funding's amount and fee
 * credited back to its organization). Returns the violations each must cause.
 */
export async function plantFaults(orm: Orm, organizations: Record<OrganizationName, SandboxOrganization>): Promise<string[]> {
  const nameOf = (organizationId: string) => ORGANIZATIONS.find((name) => organizations[name].organizationId === organizationId)!;
  const em = orm.em.fork();
  const [debited] = await em.execute<{ organization_id: string; id: string; total: string }[]>(
    `select organization_id, id, (amount + fee_amount)::text as total from card_transactions where status = 'completed' and type = 'funding' order by created_at limit 1`,
  );
  if (!debited) throw new Error('no completed card funding to skip the debit of');
  const credited = ORGANIZATIONS.find((name) => organizations[name].organizationId !== debited.organization_id)!;
  const [doubled] = await em.execute<{ reference_id: string; amount: string }[]>(
    `select reference_id, amount::text from company_balance_entries where organization_id = ? and currency = 'sat' and kind = 'credit' and reference_type = 'sandbox_credit' order by created_at limit 1`,
    [organizations[credited].organizationId],
  );
  if (!doubled) throw new Error(`no sats credit of ${credited} to double`);
  // Posted as the driver's own (`planted_fault`), so no count of the service's records changes.
  const credit = async (tx: EntityManager, organizationId: string, currency: 'usd' | 'sat', amount: bigint, id: string) => {
    const scope = { organizationId, environment: 'sandbox' as const };
    await post(tx, {
      ...scope,
      key: `planted/${organizationId}/${currency}/${id}`,
      kind: 'credit',
      reference: { type: 'planted_fault', id },
      lines: [
        { account: companyAccount(scope, currency, 'available'), amount },
        { account: counterpartyAccount(scope, 'sandbox_faucet', currency), amount: -amount },
      ],
    });
    await tx.execute(`update company_balances set available = available + ? where organization_id = ? and environment = 'sandbox' and currency = ?`, [amount.toString(), organizationId, currency]);
  };
  await em.transactional(async (tx) => {
    await credit(tx, debited.organization_id, 'usd', BigInt(debited.total), debited.id);
    await credit(tx, organizations[credited].organizationId, 'sat', BigInt(doubled.amount), doubled.reference_id);
  });
  return [`money USD of ${nameOf(debited.organization_id)}`, `money BTC of ${credited}`];
}
