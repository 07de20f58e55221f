// Identifiers: a kind prefix, then a time-sortable part and randomness ("c-0k2v8q3ds1x7mh4p"), so that
// ordering by id is ordering by creation time for pagination, and ids never collide across processes.
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

export type IdKind = 'r' | 'c' | 'n' | 'd' | 'i';

// Random bytes are drawn a few kilobytes at a time: one randomBytes call per id was 15% of the server's
// CPU in a batched submission of 1,000 requests (2,000 ids; docs/PERFORMANCE.md, issue 12's profile).
const pool = Buffer.alloc(7 * 1024);
let used = pool.length;

/** The tail's 7 base32 characters hold 35 bits. */
const TAIL_SPACE = 2 ** 35;

/** The millisecond and tail of this process's last id. */
let lastMs = -1;
let lastTail = 0;

/** 34 random bits: a millisecond's first tail, leaving room for 2^34 more ids in it. */
function randomStart(): number {
  if (used + 5 > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const high = pool[used]! & 0x03;
  const low = pool.readUInt32BE(used + 1);
  used += 5;
  return high * 2 ** 32 + low;
}

/** `n` (0 <= n < 32^width) in `width` base32 characters, most significant first. */
function base32(n: number, width: number): string {
  let s = '';
  for (let i = 0; i < width; i++) {
    s = ALPHABET[n % 32]! + s;
    n = Math.floor(n / 32);
  }
  return s;
}

/**
 * A new id of the given kind; `nowMs` is injectable so ids follow the application's clock.
 *
 * Within one millisecond of this process the tail counts up from a random start, so ids made in a burst
 * never collide and sort in the order they were made. With a random tail each (35 bits), a batch of 1,000
 * submissions made in one millisecond had a 1.5e-5 chance of a duplicate key, an error 500 about every
 * 20 minutes at 50,000 submissions/s; a bench at 1M waiting hit one. Across processes the random start
 * keeps ids apart as before.
 */
export function newId(kind: IdKind, nowMs: number = Date.now()): string {
  const ms = Math.max(0, Math.floor(nowMs));
  const tail = ms === lastMs && lastTail + 1 < TAIL_SPACE ? lastTail + 1 : randomStart();
  lastMs = ms;
  lastTail = tail;
  return `${kind}-${base32(ms, 9)}${base32(tail, 7)}`;
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
