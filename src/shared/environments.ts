/** Sandbox and live: every resource, and every ledger account, belongs to exactly one. */
export const ENVIRONMENTS = ['sandbox', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
