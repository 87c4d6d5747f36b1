import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import type { LoadOptions } from './support';

/** Marks where a request body gets a fresh UUID (LoadOptions.uniqueBody). */
const UNIQUE = '[<unique>]';

/**
 * The load generator, run as a child process of the benchmark (bench/support.ts measureHttp), so
 * that autocannon's own parsing and bookkeeping do not share the event loop of the server it
 * measures. Receives one LoadOptions object, answers with autocannon's result.
 */
process.once('message', ({ uniqueBody, ...options }: LoadOptions) => {
  const requests = uniqueBody === undefined ? {} : { requests: [{ setupRequest: (request: autocannon.Request) => ({ ...request, body: uniqueBody.replaceAll(UNIQUE, () => randomUUID()) }) }] };
  autocannon({ ...options, ...requests }).then(
    (result) => process.send!(result, () => process.exit(0)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
