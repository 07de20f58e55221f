// The dispatcher's service loop, for every backend: a pass, then a wait for a notification on
// berth_dispatch (new work, finished containers, registered nodes; coalesced) or the safety tick, and again.
// A lost lease ends the loop; any other failure (database, cloud or SLURM unreachable) is logged and the
// pass tried again at the next tick, never a crash.
import { performance } from 'node:perf_hooks';
import { sleepUnless } from '../model/clock.js';
import type { Notifier } from '../store/notifier.js';
import { LeaseLostError } from './dispatcher.js';
import { DISPATCH_WAKE } from '../store/wake.js';

export interface PassLoop {
  /** Resolves when the loop ended (stop() or a lost lease); never rejects. */
  done: Promise<void>;
  /** Ends the loop after the pass in flight. */
  stop(): Promise<void>;
  /** Asks for a pass now (a create or destroy in flight finished): the wait in progress ends. */
  poke(): void;
}

export function runPassLoop(o: {
  tick: () => Promise<void>;
  /**
   * A placing pass (Dispatcher.quickTick), run instead of a full pass when only finished containers woke
   * the loop and the last full pass is less than intervalMs old. Absent: every pass is a full one.
   */
  quick?: () => Promise<void>;
  notifier: Notifier | null;
  intervalMs: number;
  /** The berth_dispatch payloads that wake a pass (src/store/wake.ts's senders); default all of them. */
  wakeOn?: readonly string[];
  /** The lease went to another process: the loop has ended. */
  onLeaseLost: (err: LeaseLostError) => void;
  /** A pass failed; the next tick tries again. */
  onPassFailed: (err: Error) => void;
  /** Each pass's duration in seconds (metrics). */
  onPass?: (seconds: number) => void;
}): PassLoop {
  let stopped = false;
  const waiter = o.notifier?.waiter('berth_dispatch', o.wakeOn ?? null) ?? null;
  /** Ends the wait in progress (a poke, stop()). */
  let waiting: AbortController | null = null;
  /** A poke came while a pass ran: the next pass starts without waiting. */
  let poked = false;
  /** The payloads that woke the loop (the waiter's filter, wakeOn, applied), since the last pass started. */
  let woken: string[] = [];
  /** When the last full pass started (ms, performance.now()). */
  let lastFull = -Infinity;
  /** The first pass, a poke and a safety tick (nothing woke the wait) are full passes. */
  let full = true;
  const done = (async () => {
    while (!stopped) {
      const t0 = performance.now();
      const quick =
        o.quick &&
        !full &&
        !poked &&
        t0 - lastFull < o.intervalMs &&
        woken.every((p) => p === DISPATCH_WAKE.finish);
      poked = false;
      if (!quick) lastFull = t0;
      try {
        await (quick ? o.quick!() : o.tick());
      } catch (err) {
        if (err instanceof LeaseLostError) {
          o.onLeaseLost(err);
          break;
        }
        o.onPassFailed(err as Error);
      }
      o.onPass?.((performance.now() - t0) / 1000);
      if (stopped) break;
      if (poked) continue;
      waiting = new AbortController();
      // What came during the pass is held by the waiter: its next() answers at once.
      woken = waiter
        ? await waiter.next(o.intervalMs, waiting.signal)
        : (await sleepUnless(o.intervalMs, waiting.signal), []);
      waiting = null;
      full = woken.length === 0;
    }
  })();
  return {
    done,
    poke: () => {
      poked = true;
      waiting?.abort();
    },
    async stop() {
      stopped = true;
      waiting?.abort();
      await done;
      waiter?.close();
    },
  };
}
