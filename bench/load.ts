import autocannon from 'autocannon';

/**
 * The load generator, run as a child process of the benchmark (bench/support.ts measureHttp), so
 * that autocannon's own parsing and bookkeeping do not share the event loop of the server it
 * measures. Receives one autocannon options object, answers with its result.
 */
process.once('message', (options: autocannon.Options) => {
  autocannon(options).then(
    (result) => process.send!(result, () => process.exit(0)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
