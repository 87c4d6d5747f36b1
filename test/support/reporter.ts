import Mocha from 'mocha';

/** The spec reporter, closed by a plain `N passed, N failed, N skipped` line that CI reads. */
class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    // A retried test passes quietly in the spec reporter: its first failure is printed, so a flake is seen.
    runner.on(Mocha.Runner.constants.EVENT_TEST_RETRY, (test: Mocha.Test, error: Error) => {
      console.log(`\n[retried] ${test.fullTitle()}: ${error.stack ?? error.message}\n`);
    });
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const stats = runner.stats;
      if (stats) console.log(`\n${stats.passes} passed, ${stats.failures} failed, ${stats.pending} skipped`);
    });
  }
}

export = SummaryReporter;
