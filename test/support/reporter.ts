import Mocha from 'mocha';

/** The spec reporter, closed by a plain `N passed, N failed, N skipped` line that CI reads. */
class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const stats = runner.stats;
      if (stats) console.log(`\n${stats.passes} passed, ${stats.failures} failed, ${stats.pending} skipped`);
    });
  }
}

export = SummaryReporter;
