// Notifications to other processes (LISTEN/NOTIFY), sent after the change committed and coalesced.
// A NOTIFY inside a writing transaction takes PostgreSQL's global notify lock through the commit, so
// every such commit (and its WAL flush) would be serialised: with it in the submit path, 16 clients made
// 9 submissions/s here. Sent afterwards, in its own statement, it costs no flush; several changes in the
// same moment send one, and under load at most one such statement is in flight (the rest wait for it
// and go out together). If the process dies between the commit and the NOTIFY, the listeners' safety
// ticks pick the change up.
import type { Queryable } from './db.js';

/**
 * Why a berth_dispatch notification was sent (its payload): new work, a priority change, a container that
 * ended, a node's change, an operator's request. Listeners filter on these (src/dispatch/loop.ts).
 */
export const DISPATCH_WAKE = {
  queue: 'queue',
  priority: 'priority',
  finish: 'finish',
  node: 'node',
  operator: 'operator',
} as const;
export type DispatchWake = (typeof DISPATCH_WAKE)[keyof typeof DISPATCH_WAKE];

export class Wake {
  private readonly pending = new Set<string>();
  private timer: NodeJS.Immediate | null = null;
  /** The NOTIFY statement in flight: at most one at a time; what arrives meanwhile goes in the next. */
  private flushing: Promise<void> | null = null;

  constructor(private readonly db: Queryable) {}

  /** Asks for a NOTIFY on channel with payload, soon (coalesced with others in the same turn). */
  send(channel: 'berth_dispatch' | 'berth_node' | 'berth_logs', payload: string): void {
    this.pending.add(`${channel}\u0000${payload}`);
    if (this.flushing === null) this.timer ??= setImmediate(() => this.flush());
  }

  private flush(): void {
    this.timer = null;
    if (this.pending.size === 0 || this.flushing !== null) return;
    const batch = [...this.pending];
    this.pending.clear();
    const channels = batch.map((b) => b.split('\u0000')[0]!);
    const payloads = batch.map((b) => b.split('\u0000')[1]!);
    this.flushing = this.db
      .query({
        name: 'berth-notify',
        text: `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS u(c, p)`,
        values: [channels, payloads],
      })
      .then(
        () => {},
        () => {},
      )
      .finally(() => {
        this.flushing = null;
        // Under load, everything sent while this one ran goes out together now.
        if (this.pending.size > 0) this.timer ??= setImmediate(() => this.flush());
      });
  }
}
