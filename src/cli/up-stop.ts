// Leaving the machine clean when `berth up` stops: no agent process, container or local instance stays
// behind, gracefully (through the dispatcher, recording why) or at once (a second Ctrl-C).
import type { Dispatcher } from '../dispatch/dispatcher.js';
import type { Shutdown } from '../server/shutdown.js';
import type { Store } from '../store/store.js';

/**
 * Shuts every instance down through the dispatcher: their Locked containers go back to the queue and their
 * Running ones are cancelled (temp), so the next start retries them. The instances are destroyed even when
 * the database cannot record it (the next start then fails their nodes: their instances are gone).
 */
export async function destroyAll(
  dispatcher: Dispatcher,
  store: Store,
  say: (line: string) => void,
): Promise<void> {
  const running = await store.ctx.pool
    .query(`SELECT count(*)::int AS n FROM containers WHERE state = 'Running'`)
    .then((r) => r.rows[0].n as number)
    .catch(() => null);
  const n = await dispatcher.shutdownAll('berth up is stopping');
  if (n > 0)
    say(
      `shut down ${n} local instance(s)${running ? `; ${running} running container(s) will be retried at the next start` : ''}`,
    );
}

/**
 * A forced stop: the embedded PostgreSQL and every local instance of this home (agents, their containers,
 * cgroups) killed at once, writing nothing to the database. The next start finds the instances gone, fails
 * their nodes, and retries their containers, as after a graceful stop. The home lock guarantees that every
 * instance of the home is this process's.
 */
export async function forceStop(shutdown: Shutdown, home: string): Promise<void> {
  shutdown.killOwned();
  const { LocalDriver } = await import('../cloud/local/driver.js');
  const driver = new LocalDriver({ home, stopGraceMs: 0, cgroups: false });
  const live = (await driver.list({})).filter((i) => i.state !== 'terminated');
  await Promise.allSettled(live.map((i) => driver.destroy(i.id)));
}
