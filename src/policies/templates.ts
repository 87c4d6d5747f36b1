import type { ActionType, Condition, PolicyCategory } from './schema';

export interface TemplateRule {
  name: string;
  description: string;
  action_type: ActionType;
  action_config: Record<string, unknown>;
  conditions: Condition[];
}

export interface PolicyTemplate {
  id: string;
  name: string;
  description: string;
  category: PolicyCategory;
  rules: TemplateRule[];
}

/**
 * Stands for the organization's built-in `approver` role; replaced by that role's id when a
 * policy is created from the template (role ids differ per organization).
 */
export const APPROVER_ROLE_PLACEHOLDER = 'builtin:approver';

const catchAllAllow: TemplateRule = {
  name: 'Allow everything else',
  description: 'Explicit default',
  action_type: 'allow',
  action_config: {},
  conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }],
};

/** The built-in templates of `GET /v1/policy-templates`; edit the copy, not the template. */
export const POLICY_TEMPLATES: PolicyTemplate[] = [
  {
    id: 'tmpl_block_above_amount',
    name: 'Block above an amount',
    description: 'Blocks any transaction worth more than 50,000 USD.',
    category: 'limits',
    rules: [
      { name: 'Block large transfers', description: '', action_type: 'block', action_config: { reason: 'Above the 50,000 USD limit' },
        conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '50000' }] },
      catchAllAllow,
    ],
  },
  {
    id: 'tmpl_approval_above_amount',
    name: 'N-of-M approval above an amount',
    description: 'Transactions above 10,000 USD need 2 approvals from the approver role.',
    category: 'approvals',
    rules: [
      { name: 'Approve large transfers', description: '', action_type: 'require_approval',
        action_config: { approvers: [{ id: APPROVER_ROLE_PLACEHOLDER, type: 'role' }], required_approvals: 2, expiry_hours: 24 },
        conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '10000' }] },
      catchAllAllow,
    ],
  },
  {
    id: 'tmpl_destination_whitelist',
    name: 'Destination whitelist (address book)',
    description: 'Only destinations from the address book or own vaults; everything else is blocked.',
    category: 'whitelist',
    rules: [
      { name: 'Allow whitelisted destinations', description: '', action_type: 'allow', action_config: {},
        conditions: [{ field: 'destination_type', operator: 'in', values: ['address_book', 'vault'] }] },
      { name: 'Block other destinations', description: '', action_type: 'block', action_config: { reason: 'Destination is not whitelisted' },
        conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
    ],
  },
  {
    id: 'tmpl_velocity_cap',
    name: 'Velocity cap',
    description: 'Blocks once 100,000 USD or 50 transactions have gone out in the rolling 24 h; alerts above 20 per hour.',
    category: 'velocity',
    rules: [
      { name: 'Daily USD cap', description: '', action_type: 'block', action_config: { reason: 'Daily USD velocity cap reached' },
        conditions: [{ field: 'velocity_amount_usd_24h', operator: 'greater_than_or_equal', value: '100000' }] },
      { name: 'Daily count cap', description: '', action_type: 'block', action_config: { reason: 'Daily transaction count cap reached' },
        conditions: [{ field: 'velocity_count_24h', operator: 'greater_than_or_equal', value: '50' }] },
      { name: 'Hourly burst alert', description: '', action_type: 'alert', action_config: { message: 'More than 20 transactions in an hour' },
        conditions: [{ field: 'velocity_count_1h', operator: 'greater_than', value: '20' }] },
      catchAllAllow,
    ],
  },
];

export const findTemplate = (id: string): PolicyTemplate | undefined => POLICY_TEMPLATES.find((template) => template.id === id);
