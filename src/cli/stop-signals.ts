// How `berth up`, `berth server` and `berth dispatch` react to SIGINT and SIGTERM (docs/OPERATIONS.md
// "Stopping").
//
// The first SIGINT or SIGTERM begins a graceful stop. One request can arrive twice: a wrapper in the
// terminal's foreground group that forwards the Ctrl-C it gets to its child (which gets the terminal's own)
// delivers it twice, and a supervisor may signal both a process and its group. (npm forwards it to the
// `sh -c` it runs berth through, which dies of it, so `npx berth up` sees one.) So a repeat within
// REPEAT_WINDOW_MS is the same request; a later one (a second Ctrl-C) stops at once: `force` kills what must
// not outlive the process, and the process exits. A graceful stop still running after the deadline is forced
// the same way, so the process always ends in bounded time.
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
  /** Injected in tests: where signals come from, a monotonic clock (ms), the process's exit. */
  signals?: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
  /**
   * Outputs whose reader going away (EPIPE: `berth up | head -3` once head has its lines) asks for a graceful
   * stop, as SIGTERM would — once: a later EPIPE is not a second request, so it never forces the stop.
   * Default stdout and stderr.
   */
  outputs?: Pick<NodeJS.EventEmitter, 'on' | 'off'>[];
  now?: () => number;
  exit?: (code: number) => void;
}): StopSignals {
  const signals = o.signals ?? process;
  const now = o.now ?? (() => performance.now());
  const exit = o.exit ?? ((code: number) => process.exit(code));
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
    exit(code);
  };

  const onSignal = (sig: NodeJS.Signals) => {
    const at = now();
    if (firstAt === null) {
      firstAt = at;
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
    if (at - firstAt < REPEAT_WINDOW_MS) return; // the same request, delivered twice
    void forceStop(`${sig} again`, EXIT_CODE[sig] ?? 1);
  };
  const outputs = o.outputs ?? [process.stdout, process.stderr];
  const onOutputError = (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    if (firstAt === null) onSignal('SIGTERM');
  };
  signals.on('SIGINT', onSignal);
  signals.on('SIGTERM', onSignal);
  for (const out of outputs) out.on('error', onOutputError);
  return {
    requested,
    dispose() {
      signals.off('SIGINT', onSignal);
      signals.off('SIGTERM', onSignal);
      for (const out of outputs) out.off('error', onOutputError);
      for (const t of timers) clearTimeout(t);
    },
  };
}
