/** Runs what a test registered to stop, last started first, each even when an earlier one failed. */
export async function runCleanups(cleanups: (() => unknown)[]): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse())
    await Promise.resolve()
      .then(cleanup)
      .catch(() => undefined);
}
