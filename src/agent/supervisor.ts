// Watches one running container for the agent: enforces max_run_time and the scratch limit, cancels with
// SIGTERM then SIGKILL after kill_grace, and samples usage. It works on any RunHandle, so every runtime
// gets the same policy; the runtimes only enforce what the kernel can (CPU quota, memory limit).
import { formatDuration, formatSize } from '../model/units.js';
import { longTimers, nodeTimers, systemClock, type Clock, type Timers } from '../model/clock.js';
import { PROCESS_OPTIONS } from '../config/options.js';
import type { ExitInfo, RunHandle, Usage } from './runtimes/types.js';

export type { Timers };

const MiB = 1024 * 1024;

/** Default grace between SIGTERM and SIGKILL (DESIGN §8): the declared default of --kill-grace. */
export const DEFAULT_KILL_GRACE_MS = PROCESS_OPTIONS.defaultOf('kill_grace');

/** Policy for one container. */
export interface SupervisorOptions {
  /** Kill after this long (from `startedAt`); null or undefined = no limit. */
  maxRunTimeMs?: number | null;
  /** Scratch limit in bytes; 0 or undefined = unlimited. */
  scratchBytes?: number;
  killGraceMs?: number;
  /** How often usage is sampled and scratch checked. */
  sampleIntervalMs?: number;
  /** When the container started; a re-attached container keeps its original deadline. */
  startedAt?: Date;
  onSample?: (usage: Usage) => void;
  /** Called with a line for the container's log when Berth decides to stop it. */
  onEvent?: (message: string) => void;
  clock?: Clock;
  timers?: Timers;
}

/** One container under supervision. */
export class Supervisor {
  private reason: string | null = null;
  private killTimer: unknown = null;
  private sampleTimer: unknown = null;
  private deadlineTimer: unknown = null;
  private finished = false;
  private readonly result: Promise<ExitInfo>;
  private readonly timers: Timers;
  private readonly grace: number;
  /** The most recent usage sample, or null before the first. */
  lastUsage: Usage | null = null;

  constructor(
    readonly handle: RunHandle,
    private readonly opts: SupervisorOptions = {},
  ) {
    // Long timers: max_run_time and the kill grace come from users and operators, and may exceed 24.8 days.
    this.timers = longTimers(opts.timers ?? nodeTimers);
    this.grace = opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
    const clock = opts.clock ?? systemClock;
    if (opts.maxRunTimeMs != null) {
      const limit = opts.maxRunTimeMs;
      const elapsed = opts.startedAt ? clock.now().getTime() - opts.startedAt.getTime() : 0;
      this.deadlineTimer = this.timers.setTimeout(
        () => void this.stop(`killed: max_run_time ${formatDuration(limit)} exceeded`),
        Math.max(0, limit - elapsed),
      );
    }
    this.scheduleSample();
    this.result = handle.wait().then((info) => {
      this.finished = true;
      this.clearTimers();
      return this.reason ? { ...info, reason: this.reason } : info;
    });
    // A failure in wait() is the caller's to see through wait(); do not also leak an unhandled rejection.
    this.result.catch(() => this.clearTimers());
  }

  /** The container's end, with Berth's reason when Berth stopped it. */
  wait(): Promise<ExitInfo> {
    return this.result;
  }

  /** Cancels the container: SIGTERM now, SIGKILL after the grace period. */
  cancel(reason = 'cancelled'): Promise<void> {
    return this.stop(reason);
  }

  /**
   * Stops supervising without touching the container (the agent is shutting down and leaves it to the
   * next agent, which supervises it again from `startedAt`). No timer of this supervisor fires afterwards.
   */
  detach(): void {
    this.finished = true;
    this.clearTimers();
  }

  private async stop(reason: string): Promise<void> {
    if (this.finished || this.reason) return; // the first reason wins; the kill is already under way
    this.reason = reason;
    this.opts.onEvent?.(`${reason}: sending SIGTERM, SIGKILL in ${formatDuration(this.grace)}`);
    try {
      await this.handle.signal('SIGTERM');
    } finally {
      // The grace counts from the TERM delivered (finding a container's processes takes time on a busy
      // machine), and is not armed for a container that ended meanwhile.
      if (!this.finished)
        this.killTimer = this.timers.setTimeout(
          () => void this.handle.signal('SIGKILL').catch(() => {}),
          this.grace,
        );
    }
  }

  private scheduleSample(): void {
    if (this.finished) return;
    this.sampleTimer = this.timers.setTimeout(() => void this.sample(), this.opts.sampleIntervalMs ?? 5000);
  }

  private async sample(): Promise<void> {
    if (this.finished) return;
    try {
      const u = await this.handle.usage();
      if (this.finished) return;
      this.lastUsage = u;
      this.opts.onSample?.(u);
      const limit = this.opts.scratchBytes ?? 0;
      // Output not yet shipped sits on the instance's disk too, and counts (issue 10 item 4).
      const output = u.outputBytes ?? 0;
      const used = u.scratchBytes + output;
      if (limit > 0 && used > limit)
        await this.stop(
          `killed: scratch ${formatSize(used)} > limit ${formatSize(limit)}` +
            (output >= MiB ? ` (of which ${formatSize(output)} output not yet shipped)` : ''),
        );
    } catch (err) {
      this.opts.onEvent?.(`usage sample failed: ${(err as Error).message}`);
    }
    this.scheduleSample();
  }

  private clearTimers(): void {
    for (const t of [this.killTimer, this.sampleTimer, this.deadlineTimer])
      if (t !== null) this.timers.clearTimeout(t);
    this.killTimer = this.sampleTimer = this.deadlineTimer = null;
  }
}
