// The charts' data: the server samples the queue depth, the instances by type and the spend rate into a
// small table at a fixed interval (src/store/dashboard.ts), and forgets samples after two days.
import type { Store } from '../store/store.js';

export const SAMPLE_INTERVAL_MS = 15_000;
export const SAMPLE_KEEP_MS = 2 * 86_400_000;

/** One sample for the bucket of `now` (aligned, so several servers write each bucket once). */
export async function sampleOnce(store: Store): Promise<void> {
  const now = store.ctx.clock.now().getTime();
  await store.dashboard.sample(new Date(now - (now % SAMPLE_INTERVAL_MS)));
  if (now % (SAMPLE_INTERVAL_MS * 240) < SAMPLE_INTERVAL_MS)
    await store.dashboard.pruneSamples(new Date(now - SAMPLE_KEEP_MS));
}

/** Samples every SAMPLE_INTERVAL_MS until stopped; a failed sample (database away) is skipped. */
export function startSampler(store: Store, onError: (err: unknown) => void): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  const tick = () => {
    running ??= sampleOnce(store)
      .catch(onError)
      .finally(() => (running = null));
  };
  tick();
  const timer = setInterval(tick, SAMPLE_INTERVAL_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
