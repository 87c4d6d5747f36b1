import { writeFileSync } from 'node:fs';
import Mocha from 'mocha';
import type { RunCounts } from './summary';

/**
 * The spec reporter, closed by a plain `N passed, N failed, N skipped` line that CI reads. When the
 * suite is several mocha runs (scripts/test.sh), each writes its counts to TEST_SUMMARY_FILE instead
 * and test/support/summary.ts prints the line for all of them.
 */
class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    // A retried test passes quietly in the spec reporter: its first failure is printed, so a flake is seen.
    runner.on(Mocha.Runner.constants.EVENT_TEST_RETRY, (test: Mocha.Test, error: Error) => {
      console.log(`\n[retried] ${test.fullTitle()}: ${error.stack ?? error.message}\n`);
    });
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const stats = runner.stats;
      if (!stats) return;
      const counts: RunCounts = { passes: stats.passes, failures: stats.failures, pending: stats.pending };
      if (process.env.TEST_SUMMARY_FILE) writeFileSync(process.env.TEST_SUMMARY_FILE, JSON.stringify(counts));
      else console.log(`\n${counts.passes} passed, ${counts.failures} failed, ${counts.pending} skipped`);
    });
  }
}

export = SummaryReporter;
