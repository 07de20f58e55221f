// Identifiers: a kind prefix, then a time-sortable part and randomness ("c-0k2v8q3ds1x7mh4p"), so that
// ordering by id is ordering by creation time for pagination, and ids never collide across processes.
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

export type IdKind = 'r' | 'c' | 'n' | 'd' | 'i';

// Random bytes are drawn a few kilobytes at a time: one randomBytes call per id was 15% of the server's
// CPU in a batched submission of 1,000 requests (2,000 ids; docs/PERFORMANCE.md, issue 12's profile).
const pool = Buffer.alloc(7 * 1024);
let used = pool.length;

/** A new id of the given kind; `nowMs` is injectable so ids follow the application's clock. */
export function newId(kind: IdKind, nowMs: number = Date.now()): string {
  let t = Math.max(0, Math.floor(nowMs));
  let time = '';
  for (let i = 0; i < 9; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  if (used + 7 > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  let tail = '';
  for (let i = 0; i < 7; i++) tail += ALPHABET[pool[used++]! % 32]!;
  return `${kind}-${time}${tail}`;
}

/**
 * The id of a request's first container: "c-" and the request id's tail. Derived, so that reading a request's
 * containers needs no index entry for it (migration 191; OF_REQUEST in src/store/records.ts is its SQL).
 */
export function firstContainerId(requestId: string): string {
  return `c-${requestId.slice(2)}`;
}

/** True when s looks like an id of the given kind (cheap check before touching the database). */
export function isId(kind: IdKind, s: unknown): s is string {
  return (
    typeof s === 'string' &&
    s.length === 18 &&
    s.startsWith(`${kind}-`) &&
    /^[0-9a-hjkmnp-tv-z]+$/.test(s.slice(2))
  );
}
