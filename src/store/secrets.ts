// Secrets: API tokens (stored as sha256 hashes) and per-lock tokens (HMACs over container id and lock
// generation, so nothing per lock is stored and unlocking revokes by bumping the generation).
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from './db.js';

export function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** A new random secret with a recognisable prefix ("bt_" for API tokens, "bs_" for bootstrap). */
export function newSecret(prefix: 'bt_' | 'bs_'): string {
  return prefix + randomBytes(24).toString('base64url');
}

/** A server-wide random key kept in the settings table, created on first use (the same in every process). */
export async function serverKey(db: Queryable, name: 'lock_key' | 'dashboard_key'): Promise<Buffer> {
  await db.query(`INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [
    name,
    randomBytes(32).toString('hex'),
  ]);
  const r = await db.query<{ value: string }>(`SELECT value FROM settings WHERE key = $1`, [name]);
  return Buffer.from(r.rows[0]!.value, 'hex');
}

/** The server-wide key for per-lock tokens. */
export function lockKey(db: Queryable): Promise<Buffer> {
  return serverKey(db, 'lock_key');
}

/** The per-lock token for a container at a lock generation: "GENERATION.HMAC". */
export function lockToken(key: Buffer, containerId: string, generation: number): string {
  const mac = createHmac('sha256', key).update(`${containerId}:${generation}`).digest('base64url');
  return `${generation}.${mac}`;
}

/** Checks a per-lock token against the container's current generation. */
export function lockTokenValid(
  key: Buffer,
  containerId: string,
  generation: number,
  token: unknown,
): boolean {
  if (typeof token !== 'string') return false;
  const expected = Buffer.from(lockToken(key, containerId, generation));
  const got = Buffer.from(token);
  return expected.length === got.length && timingSafeEqual(expected, got);
}

/**
 * The lock generation a per-lock token was issued for, when the token is genuine (its HMAC matches);
 * null for anything else. The caller then checks that generation is still the container's.
 */
export function tokenGeneration(key: Buffer, containerId: string, token: unknown): number | null {
  if (typeof token !== 'string') return null;
  const dot = token.indexOf('.');
  const generation = Number(token.slice(0, dot));
  if (dot <= 0 || !Number.isSafeInteger(generation) || generation < 0) return null;
  return lockTokenValid(key, containerId, generation, token) ? generation : null;
}
