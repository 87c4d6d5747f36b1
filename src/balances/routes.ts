import { randomUUID } from 'node:crypto';
import type { RouteRegistry } from '../http/route';
import { requireScope } from '../api-keys/scopes';
import { z } from '../shared/schemas';
import { CompanyBalanceObject, SandboxCreditBody } from './schemas';
import { applyBalanceEntry, presentBalance, readBalances } from './service';

export function registerBalanceRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/balances',
    operationId: 'listCompanyBalances',
    summary: "The organization's USD company balance (cents), Lightning balance (sats) and stablecoin payout credits (micro-units)",
    tag: 'Balances',
    scope: ['custody:read', 'cards:read', 'lightning:read', 'payouts:read'],
    response: {
      status: 200,
      description: 'Every balance, zero included',
      schema: z.object({ object: z.literal('list'), data: z.array(CompanyBalanceObject), has_more: z.literal(false), next_cursor: z.null() }),
    },
    handler: async ({ auth, em }) => {
      const balances = await readBalances(em, auth.organizationId, auth.environment);
      return { body: { object: 'list', data: balances.map((balance) => presentBalance(balance)), has_more: false, next_cursor: null } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/balances',
    operationId: 'sandboxCreditBalance',
    summary: 'Sandbox: credit the USD company balance (or the Lightning balance, or a stablecoin balance)',
    tag: 'Sandbox',
    scope: ['cards:write', 'lightning:write', 'payouts:write'],
    sandboxOnly: true,
    body: SandboxCreditBody,
    response: { status: 200, description: 'The balance after the credit', schema: CompanyBalanceObject },
    handler: async ({ auth, em, body }) => {
      const scope = body.currency === 'usd' ? 'cards:write' : body.currency === 'sat' ? 'lightning:write' : 'payouts:write';
      requireScope(auth.scopes, scope);
      const amount = body.amount;
      const { balance } = await applyBalanceEntry(em, {
        organizationId: auth.organizationId,
        environment: auth.environment,
        currency: body.currency,
        kind: 'credit',
        amount,
        reference: { type: 'sandbox_credit', id: body.reference ?? randomUUID() },
      });
      return { body: presentBalance(balance) };
    },
  });
}
