/**
 * Where a run's wall time went, phase by phase (cluster start, setup, load, kills' tails, settle, checks, the planted
 * faults' re-check, stop): the report prints it so that a slow run says what it waited for. Never asserted (no timing
 * assertion in a test): it is what a change to the run's cost is measured with.
 */
export class Phases {
  readonly seconds: { phase: string; seconds: number }[] = [];
  private last = performance.now();
  private readonly first = this.last;

  /** Parts of the phase in progress, timed each (`timed`) and said with it: parts that ran at once show what they would cost one after another. */
  private readonly parts: string[] = [];

  /** `work`, its seconds noted as a part of the phase in progress. */
  async timed<T>(part: string, work: Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work;
    } finally {
      this.parts.push(`${part} ${((performance.now() - started) / 1000).toFixed(0)} s`);
    }
  }

  /** The phase that just ended, named. */
  end(phase: string): void {
    const now = performance.now();
    this.seconds.push({ phase: this.parts.length > 0 ? `${phase} (${this.parts.splice(0).join(', ')})` : phase, seconds: (now - this.last) / 1000 });
    this.last = now;
  }

  line(): string {
    return `time: ${this.seconds.map(({ phase, seconds }) => `${phase} ${seconds.toFixed(0)} s`).join(', ')}; ${((this.last - this.first) / 1000).toFixed(0)} s in all`;
  }
}
