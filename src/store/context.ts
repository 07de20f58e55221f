// What every store module shares: the pool, the application's clock and randomness, and options.
import type { Clock, Rng } from '../model/clock.js';
import type { Db } from './db.js';
import type { Wake } from './wake.js';

export interface StoreOptions {
  /** A container locked and unlocked more than this many times is cancelled perm (DESIGN §3.3). */
  maxDispatchAttempts: number;
}

export const DEFAULT_STORE_OPTIONS: StoreOptions = { maxDispatchAttempts: 10 };

export interface StoreContext {
  pool: Db;
  clock: Clock;
  rng: Rng;
  options: StoreOptions;
  /** Notifications to other processes, sent after commit. */
  wake: Wake;
}
