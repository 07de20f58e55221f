// A dispatcher "process" that can be killed -9: its own pool and lease connection (tagged with an
// application_name), its own PgQueue and Store, and the cloud driver behind a gate. kill() makes every
// later call of the process hang forever (a dead process does nothing more) and terminates its database
// sessions from the server side, as PostgreSQL does when a process dies: the advisory-lock lease goes.
import { bootDataFor } from '../cloud/boot-data.js';
import type { Driver } from '../cloud/driver.js';
import { Dispatcher, type DispatchEvent } from '../dispatch/dispatcher.js';
import { PgQueue } from '../dispatch/pg-queue.js';
import type { DispatchQueue } from '../dispatch/ports.js';
import { seededRng } from '../model/clock.js';
import type { VirtualClock } from '../sim/clock.js';
import { createPool, type Db } from '../store/db.js';
import { Store } from '../store/store.js';
import { CONFIG, TIMERS, TYPES } from './world.js';

/** Where a process dies: after the named call (e.g. "driver.create", "queue.lock") next succeeds. */
export type KillPoint = `${'driver' | 'queue'}.${string}`;

export const DISPATCHER_ID = 'chaos/t1';

function never<T>(): Promise<T> {
  return new Promise<T>(() => {});
}

export class DispatcherProcess {
  readonly dispatcher: Dispatcher;
  readonly appName: string;
  private readonly pool: Db;
  dead = false;
  /** Resolves when the process is killed (a pass in flight never returns). */
  readonly killed: Promise<string>;
  private onKilled!: (how: string) => void;
  /** Arms a kill in the middle of a pass, right after this call next succeeds. */
  armed: KillPoint | null = null;

  constructor(
    generation: number,
    url: string,
    private readonly admin: Db,
    clock: VirtualClock,
    driver: Driver,
    seed: number,
    onEvent: (e: DispatchEvent) => void,
    /** Every driver call's outcome: successful creates (one whose process died too) and cloud errors. */
    onCloudCall: (op: string, err: Error | null) => void,
  ) {
    this.appName = `chaos-dispatcher-${generation}`;
    const u = new URL(url);
    u.searchParams.set('application_name', this.appName);
    this.pool = createPool(u.toString(), 5);
    this.killed = new Promise((r) => (this.onKilled = r));
    const store = new Store(this.pool, { clock, rng: seededRng((seed * 31 + generation) >>> 0) });
    const queue = this.gate<DispatchQueue>('queue', new PgQueue(store, u.toString()));
    const gatedDriver = this.gate<Driver>('driver', driver, onCloudCall);
    this.dispatcher = new Dispatcher({
      id: DISPATCHER_ID,
      cluster: 'chaos',
      tag: 't1',
      queue,
      driver: gatedDriver,
      clock,
      instanceTypes: TYPES,
      config: CONFIG,
      ...TIMERS,
      bootData: bootDataFor('sim:'),
      onEvent: (e) => {
        if (!this.dead) onEvent(e);
      },
    });
  }

  /** Every method call goes through: hangs once dead; kills the process after an armed call. */
  private gate<T extends object>(
    name: 'driver' | 'queue',
    target: T,
    seen?: (op: string, err: Error | null) => void,
  ): T {
    return new Proxy(target, {
      get: (t, prop, recv) => {
        const v: unknown = Reflect.get(t, prop, recv);
        if (typeof v !== 'function') return v;
        return async (...args: unknown[]) => {
          if (this.dead) return never();
          let result: unknown;
          try {
            result = await (v as (...a: unknown[]) => Promise<unknown>).apply(t, args);
          } catch (err) {
            seen?.(String(prop), err as Error);
            throw err;
          }
          seen?.(String(prop), null);
          if (!this.dead && this.armed === `${name}.${String(prop)}`) {
            await this.kill(`mid-pass, right after ${name}.${String(prop)} succeeded`);
          }
          if (this.dead) return never();
          return result;
        };
      },
    });
  }

  /** kill -9: nothing more runs; the server ends its sessions (and so its lease) as for a dead process. */
  async kill(how: string): Promise<void> {
    if (this.dead) return;
    this.dead = true;
    void this.pool.end().catch(() => {});
    const gone = async () =>
      (
        await this.admin.query(
          `SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE application_name = $1`,
          [this.appName],
        )
      ).rowCount === 0;
    const deadline = Date.now() + 30_000;
    while (!(await gone())) {
      if (Date.now() > deadline) throw new Error(`sessions of ${this.appName} did not end in 30 s`);
    }
    this.onKilled(how);
  }

  /** Ends a process that the run no longer needs (at the end: a graceful stop). */
  async close(): Promise<void> {
    if (!this.dead) {
      await Promise.race([this.dispatcher.stop().catch(() => {}), this.killed]);
      this.dead = true;
      await this.pool.end().catch(() => {});
    }
  }
}
