// Leaving the machine clean when `berth up` stops: no agent process or local instance stays behind.
import type { Dispatcher } from '../dispatch/dispatcher.js';
import type { Store } from '../store/store.js';

export async function destroyAll(
  dispatcher: Dispatcher,
  store: Store,
  say: (line: string) => void,
): Promise<void> {
  const running = await store.ctx.pool.query(
    `SELECT count(*)::int AS n FROM containers WHERE state = 'Running'`,
  );
  const n = await dispatcher.shutdownAll('berth up is stopping');
  if (n > 0) {
    const interrupted = running.rows[0].n as number;
    say(
      `shut down ${n} local instance(s)${interrupted > 0 ? `; ${interrupted} running container(s) will be retried at the next start` : ''}`,
    );
  }
}
