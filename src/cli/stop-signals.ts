// How `berth up`, `berth server` and `berth dispatch` react to SIGINT and SIGTERM (docs/OPERATIONS.md
// "Stopping").
//
// The first SIGINT or SIGTERM begins a graceful stop. One request can arrive twice: Ctrl-C under `npx`
// reaches npm, which forwards it, and Berth itself (both are in the terminal's foreground group), and a
// supervisor may signal both a process and its group. So a repeat within REPEAT_WINDOW_MS is the same
// request; a later one (a second Ctrl-C) stops at once: `force` kills what must not outlive the process, and
// the process exits. A graceful stop still running after the deadline is forced the same way, so the process
// always ends in bounded time.
import { performance } from 'node:perf_hooks';
import type { Shutdown } from '../server/shutdown.js';

export const REPEAT_WINDOW_MS = 1_000;
/** Longest graceful stop before it is forced (instances' grace, API drain, database shutdown fit well within). */
export const STOP_DEADLINE_MS = 60_000;
/** Longest a forced stop waits for `force` before exiting anyway. */
const FORCE_LIMIT_MS = 10_000;
const EXIT_CODE: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

export interface StopSignals {
  /** Resolves with the first SIGINT or SIGTERM. */
  readonly requested: Promise<NodeJS.Signals>;
  /** The stop is over (or the command failed): stop listening, cancel the deadline. */
  dispose(): void;
}

export function watchStopSignals(o: {
  say: (line: string) => void;
  shutdown: Shutdown;
  /** Kills, at once, what must not outlive the process; the process exits when it returns. */
  force: () => Promise<unknown> | void;
  deadlineMs?: number;
}): StopSignals {
  let firstAt: number | null = null;
  let forcing = false;
  const timers: NodeJS.Timeout[] = [];
  let resolveRequested!: (sig: NodeJS.Signals) => void;
  const requested = new Promise<NodeJS.Signals>((r) => (resolveRequested = r));

  const forceStop = async (why: string, code: number) => {
    if (forcing) return;
    forcing = true;
    o.say(`${why}: stopping at once`);
    o.shutdown.begin();
    const limit = new Promise((r) => setTimeout(r, FORCE_LIMIT_MS).unref());
    await Promise.race([
      Promise.resolve()
        .then(o.force)
        .catch((err: Error) => o.say(`forced stop: ${err.message}`)),
      limit,
    ]);
    process.exit(code);
  };

  const onSignal = (sig: NodeJS.Signals) => {
    const now = performance.now();
    if (firstAt === null) {
      firstAt = now;
      o.shutdown.begin();
      resolveRequested(sig);
      const key = sig === 'SIGINT' ? 'Ctrl-C' : sig;
      // Said once a repeat would no longer be taken for the same request (tests wait for this line).
      timers.push(
        setTimeout(() => o.say(`still stopping; ${key} again stops at once`), REPEAT_WINDOW_MS).unref(),
      );
      const deadline = o.deadlineMs ?? STOP_DEADLINE_MS;
      timers.push(
        setTimeout(
          () => void forceStop(`still stopping after ${Math.round(deadline / 1000)}s`, 1),
          deadline,
        ).unref(),
      );
      return;
    }
    if (now - firstAt < REPEAT_WINDOW_MS) return; // the same request, delivered twice
    void forceStop(`${sig} again`, EXIT_CODE[sig] ?? 1);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    requested,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      for (const t of timers) clearTimeout(t);
    },
  };
}
