// Notifications to other processes (LISTEN/NOTIFY), sent after the change committed and coalesced.
// A NOTIFY inside a writing transaction takes PostgreSQL's global notify lock through the commit, so
// every such commit (and its WAL flush) would be serialised: with it in the submit path, 16 clients made
// 9 submissions/s here. Sent afterwards, in its own statement, it costs no flush; several changes in the
// same moment send one. If the process dies between the commit and the NOTIFY, the listeners' safety
// ticks pick the change up.
import type { Queryable } from './db.js';

export class Wake {
  private readonly pending = new Set<string>();
  private timer: NodeJS.Immediate | null = null;

  constructor(private readonly db: Queryable) {}

  /** Asks for a NOTIFY on channel with payload, soon (coalesced with others in the same turn). */
  send(channel: 'berth_dispatch' | 'berth_node' | 'berth_logs', payload: string): void {
    this.pending.add(`${channel}\u0000${payload}`);
    this.timer ??= setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.timer = null;
    const batch = [...this.pending];
    this.pending.clear();
    if (batch.length === 0) return;
    const channels = batch.map((b) => b.split('\u0000')[0]!);
    const payloads = batch.map((b) => b.split('\u0000')[1]!);
    // A lost notification is not an error: the listeners poll as well.
    await this.db
      .query(`SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS u(c, p)`, [channels, payloads])
      .catch(() => {});
  }
}
