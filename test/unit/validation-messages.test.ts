import assert from 'node:assert/strict';
import { z } from 'zod';
import { withArticle } from '../../src/shared/articles';
import { describeIssue, namedIssueMessage } from '../../src/shared/validation-messages';

describe('Validation messages in our words', () => {
  it('puts the article English puts before a chain, a word or an abbreviation', () => {
    assert.deepEqual(
      ['ethereum', 'bitcoin', 'tron', 'solana', 'invoice', 'payment', 'integer', 'NG', 'KE', 'USDT', 'FX'].map(withArticle),
      ['an ethereum', 'a bitcoin', 'a tron', 'a solana', 'an invoice', 'a payment', 'an integer', 'an NG', 'a KE', 'a USDT', 'an FX'],
    );
  });

  it('says each zod issue as what the field is or must be, the schema\'s own message first', () => {
    const schema = z
      .object({
        name: z.string().min(1).max(5),
        count: z.number().int().max(3),
        kind: z.enum(['a', 'b']),
        id: z.uuid(),
        at: z.iso.datetime(),
        tags: z.array(z.string()).max(1),
        own: z.string().refine(() => false, 'must be fine'),
      })
      .strict();
    const result = schema.safeParse({ count: 1.5, kind: 'c', id: 'x', at: 'no', tags: ['a', 'b'], own: 'y', extra: 1 }, { error: describeIssue });
    assert.ok(!result.success);
    assert.deepEqual(
      result.error.issues.map((issue) => namedIssueMessage(issue.path.join('.') || 'body', issue.message)),
      [
        'name is required',
        'count must be an integer',
        'kind must be one of a, b',
        'id must be a UUID',
        'at must be an RFC 3339 timestamp such as "2026-05-15T12:00:00.000Z"',
        'tags must have at most 1 item',
        'own must be fine',
        'body has unknown fields: extra',
      ],
    );
    const long = z.string().max(5).safeParse('abcdefg', { error: describeIssue });
    assert.equal(long.error?.issues[0]?.message, 'must be at most 5 characters');
  });

  it('keeps a message that names its field, and puts a sentence of its own after the name', () => {
    assert.equal(namedIssueMessage('customer.date_of_birth', 'date_of_birth must be a real past date'), 'date_of_birth must be a real past date');
    assert.equal(namedIssueMessage('id_number', 'A passport number is 6 to 9 letters or digits'), 'id_number: A passport number is 6 to 9 letters or digits');
  });
});
