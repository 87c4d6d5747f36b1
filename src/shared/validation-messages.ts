import type { z } from 'zod';
import { withArticle } from './articles';

/** What zod's `invalid_format` formats are called in a message. */
const FORMATS: Record<string, string> = {
  uuid: 'a UUID',
  guid: 'a UUID',
  datetime: 'an RFC 3339 timestamp such as "2026-05-15T12:00:00.000Z"',
  date: 'a date such as "2026-05-15"',
  email: 'an email address',
  url: 'a URL',
};

const count = (amount: unknown, noun: string) => `${String(amount)} ${noun}${amount === 1 || amount === 1n ? '' : 's'}`;

/**
 * The zod error map of the API: each issue in our words, as what the field is or must be ("is required",
 * "must be a string", "must be at most 100 characters"), to follow the field's name (`namedIssueMessage`).
 * A schema's own message (a refinement's "must be a non-negative decimal string...") takes precedence over
 * it, as zod's error customization does; pass it as the `error` of a safeParse.
 */
export function describeIssue(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      if (issue.expected === 'int') return 'must be an integer';
      return `must be ${withArticle(issue.expected)}`;
    case 'too_small':
      if (issue.origin === 'string') return issue.minimum === 1 ? 'must not be empty' : `must be at least ${count(issue.minimum, 'character')}`;
      if (issue.origin === 'array' || issue.origin === 'set') return `must have at least ${count(issue.minimum, 'item')}`;
      return issue.inclusive ? `must be at least ${String(issue.minimum)}` : `must be greater than ${String(issue.minimum)}`;
    case 'too_big':
      if (issue.origin === 'string') return `must be at most ${count(issue.maximum, 'character')}`;
      if (issue.origin === 'array' || issue.origin === 'set') return `must have at most ${count(issue.maximum, 'item')}`;
      return issue.inclusive ? `must be at most ${String(issue.maximum)}` : `must be less than ${String(issue.maximum)}`;
    case 'invalid_value':
      return issue.values.length === 1 ? `must be ${JSON.stringify(issue.values[0])}` : `must be one of ${issue.values.map(String).join(', ')}`;
    case 'invalid_format':
      if (issue.format === 'regex') return `does not have the expected format (${String((issue as { pattern?: unknown }).pattern ?? 'see the API reference')})`;
      return `must be ${FORMATS[issue.format] ?? `a valid ${issue.format}`}`;
    case 'not_multiple_of':
      return `must be a multiple of ${String(issue.divisor)}`;
    case 'unrecognized_keys':
      return `has unknown fields: ${issue.keys.join(', ')}`;
    case 'invalid_union':
      return 'does not match any accepted form (see the API reference)';
    case 'invalid_key':
      return 'has an invalid key';
    case 'invalid_element':
      return 'has an invalid element';
    default:
      return 'is invalid';
  }
}

/**
 * A message naming its field: "name is required", "amount must be a decimal string...". A message that
 * names the field already ("date_of_birth must be a real past date") is kept; a sentence of its own
 * ("A passport number is 6 to 9 letters or digits") follows the field's name after a colon.
 */
export function namedIssueMessage(param: string, message: string): string {
  const field = param.split('.').at(-1)!;
  if (message.startsWith(`${param} `) || message.startsWith(`${field} `)) return message;
  if (/^(is|must|has|does) /.test(message)) return `${param} ${message}`;
  return `${param}: ${message}`;
}
