// What every store module shares: the pool, the application's clock and randomness.
import type { Clock, Rng } from '../model/clock.js';
import type { Db } from './db.js';
import type { Wake } from './wake.js';

export interface StoreContext {
  pool: Db;
  clock: Clock;
  rng: Rng;
  /** Notifications to other processes, sent after commit. */
  wake: Wake;
}
