/**
 * Polls `probe` until it returns something other than undefined, within `timeoutMs`: the one way
 * tests wait for work that finishes in a worker (never a fixed sleep, never an unbounded loop).
 * The default wait is long because the whole suite runs at a load of about 25 on two cores: there a
 * scan, a workflow or a delivery that takes a second on a quiet machine has taken over 20 s (stop 62's
 * CI run). Only a failing test waits it out.
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 60_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** `promise`, or a rejection naming `what` once `timeoutMs` pass: a step with no bound of its own fails saying which it was. */
export async function within<T>(promise: Promise<T>, what: string, timeoutMs = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
