// Tests that need a component (docker, runc, root, SLURM...) skip with a visible reason when it is
// absent, unless BERTH_REQUIRE_ALL=1 (as in CI), where a missing component fails the test instead.
import { it } from 'vitest';

export const requireAll = process.env.BERTH_REQUIRE_ALL === '1';

/**
 * Returns an `it` that runs when `missing` is null and otherwise skips (reason in the test name) or,
 * under BERTH_REQUIRE_ALL=1, fails with the reason.
 */
export function itIf(missing: string | null): typeof it {
  if (missing === null) return it;
  if (requireAll) {
    const failing = ((name: string) =>
      it(name, () => {
        throw new Error(`BERTH_REQUIRE_ALL=1 but ${missing}`);
      })) as unknown as typeof it;
    return failing;
  }
  // vitest's skipIf: reported as skipped, with the reason in the name (the runner counts and prints skips).
  return ((name: string, fn?: unknown, timeout?: number) =>
    it.skipIf(true)(`${name} [skipped: ${missing}]`, fn as never, timeout)) as unknown as typeof it;
}
