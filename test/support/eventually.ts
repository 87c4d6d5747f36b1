/**
 * Polls `probe` until it returns something other than undefined, within `timeoutMs`: the one way
 * tests wait for work that finishes in a worker (never a fixed sleep, never an unbounded loop).
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
