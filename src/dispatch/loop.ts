// The dispatcher's service loop, for every backend: a pass, then a wait for a notification on
// berth_dispatch (new work, finished containers, registered nodes; coalesced) or the safety tick, and again.
// A lost lease ends the loop; any other failure (database, cloud or SLURM unreachable) is logged and the
// pass tried again at the next tick, never a crash.
import { performance } from 'node:perf_hooks';
import type { Notifier } from '../store/notifier.js';
import { LeaseLostError } from './dispatcher.js';

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
  let wake: (() => void) | null = null;
  /** A poke came while a pass ran: the next pass starts without waiting. */
  let poked = false;
  const done = (async () => {
    while (!stopped) {
      poked = false;
      const t0 = performance.now();
      try {
        await o.tick();
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
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        waiter ? waiter.next(o.intervalMs) : new Promise((r) => (timer = setTimeout(r, o.intervalMs))),
        new Promise<void>((r) => (wake = r)),
      ]);
      clearTimeout(timer);
    }
  })();
  return {
    done,
    poke: () => {
      poked = true;
      wake?.();
    },
    async stop() {
      stopped = true;
      wake?.();
      await done;
      waiter?.close();
    },
  };
}
