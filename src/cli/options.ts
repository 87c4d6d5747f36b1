import type { EntityManager } from '@mikro-orm/postgresql';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { Organization } from '../organizations/entities';

/** What the operator CLI's commands read of their options, and how they refuse bad ones (src/cli.ts). */
export type Options = Record<string, string | boolean | undefined>;

export function required(options: Options, name: string): string {
  const value = options[name];
  if (typeof value !== 'string' || !value) throw new UsageError(`--${name} is required`);
  return value;
}

export function text(options: Options, name: string): string | undefined {
  const value = options[name];
  return typeof value === 'string' ? value : undefined;
}

export class UsageError extends Error {}

export function wholeNumber(value: string, name: string, max: number): number {
  const number = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(number <= max)) throw new UsageError(`--${name} must be a whole number from 0 to ${max}`);
  return number;
}

export function environmentOption(options: Options): Environment {
  const value = text(options, 'environment') ?? 'sandbox';
  if (!(ENVIRONMENTS as readonly string[]).includes(value)) throw new UsageError(`--environment must be one of ${ENVIRONMENTS.join(', ')}`);
  return value as Environment;
}

export async function organization(em: EntityManager, id: string): Promise<Organization> {
  const org = await em.findOne(Organization, { id });
  if (!org) throw new UsageError(`no organization ${id}`);
  return org;
}
