/** Waiting for an event in a test: poll a condition, never sleep a fixed sub-second time and hope (STYLE.md). */

/** Resolves once `condition()` holds (polled every 20 ms); rejects after `timeoutMs` naming `what` it waited for. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
  what = "a condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
