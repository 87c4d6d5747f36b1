import { z } from 'zod';

/** A node's URL in configuration: http or https only. */
export const nodeUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });
