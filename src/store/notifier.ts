// One LISTEN connection per process, shared by everything that waits for a change (log followers, agent
// long polls, the dispatcher). Reconnects after a database restart; waiters also time out, so a lost
// notification costs at most one poll interval, never a hang.
import pg from 'pg';
import { systemTimers } from '../model/clock.js';

type Listener = (payload: string) => void;

/** Waits for notifications with a given payload on one channel. */
export interface Waiter {
  /**
   * Resolves on the next matching notification, after timeoutMs, or when `signal` aborts, whichever is
   * first, with the matching payloads received since the previous call (each once; none after a timeout
   * or an abort with nothing received): the filter is the waiter's, and nothing it let through is lost.
   */
  next(timeoutMs: number, signal?: AbortSignal): Promise<string[]>;
  close(): void;
}

export class Notifier {
  private client: pg.Client | null = null;
  private readonly listeners = new Map<string, Set<Listener>>();
  private closed = false;
  private connecting: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  /** Waiters blocked in next(): released at stop() so that long polls end before the pool closes. */
  private readonly blocked = new Set<() => void>();

  constructor(private readonly url: string) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    this.connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.url });
      client.on('error', () => this.reconnectSoon());
      client.on('end', () => this.reconnectSoon());
      client.on('notification', (n) => {
        for (const l of this.listeners.get(n.channel) ?? []) l(n.payload ?? '');
      });
      try {
        await client.connect();
        for (const channel of this.listeners.keys())
          await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        this.client = client;
      } catch {
        client.removeAllListeners('end');
        await client.end().catch(() => {});
        this.reconnectSoon();
      }
    })().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private reconnectSoon(): void {
    this.client = null;
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, 500);
    this.retryTimer.unref();
  }

  /** Calls fn for every notification on channel; returns the unsubscribe function. */
  subscribe(channel: string, fn: Listener): () => void {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      this.client?.query(`LISTEN ${pg.escapeIdentifier(channel)}`).catch(() => this.reconnectSoon());
    }
    set.add(fn);
    return () => set.delete(fn);
  }

  /** A waiter for notifications on channel whose payload is key, one of keys, or any payload (null). */
  waiter(channel: string, key: string | readonly string[] | null): Waiter {
    let pending: (() => void) | null = null;
    /** The matching payloads received since the last next() resolved. */
    const fired = new Set<string>();
    const keys = key === null ? null : new Set(typeof key === 'string' ? [key] : key);
    const unsubscribe = this.subscribe(channel, (payload) => {
      if (keys !== null && !keys.has(payload)) return;
      fired.add(payload);
      pending?.();
    });
    const blocked = this.blocked;
    const closed = () => this.closed;
    const take = () => {
      const got = [...fired];
      fired.clear();
      return got;
    };
    return {
      next: (timeoutMs, signal) =>
        new Promise<string[]>((resolve) => {
          if (fired.size > 0 || closed() || signal?.aborted) return resolve(take());
          const t = systemTimers.setTimeout(done, timeoutMs);
          function done() {
            systemTimers.clearTimeout(t);
            signal?.removeEventListener('abort', done);
            pending = null;
            blocked.delete(done);
            // Taken after the notifications that came in the same read (one NOTIFY statement's) are in.
            queueMicrotask(() => resolve(take()));
          }
          pending = done;
          blocked.add(done);
          signal?.addEventListener('abort', done, { once: true });
        }),
      close: unsubscribe,
    };
  }

  async stop(): Promise<void> {
    this.closed = true;
    for (const release of [...this.blocked]) release();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const c = this.client;
    this.client = null;
    if (c) {
      c.removeAllListeners('end');
      await c.end().catch(() => {});
    }
  }
}
