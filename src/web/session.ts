// Dashboard sessions (docs/DASHBOARD.md, "Security"). Signing in with an API token sets a cookie that is
// not the token: "v1.TOKEN_ID.EXPIRES.MAC", an HMAC under a server key, HttpOnly, SameSite=Strict, Path
// /dashboard, 12 hours. It authenticates the dashboard only (the API takes bearer tokens), ends when it
// expires or its token is revoked, and never reaches the page's scripts. Forms that change something carry
// a CSRF token derived from the session (HMAC again), checked with the request's Origin.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../model/clock.js';
import type { Queryable } from '../store/db.js';
import { serverKey } from '../store/secrets.js';
import type { Principal, Tokens } from '../store/tokens.js';

export const COOKIE = 'berth_session';
export const SESSION_MS = 12 * 3600_000;

export class Sessions {
  private key: Promise<Buffer> | null = null;

  constructor(
    private readonly db: Queryable,
    private readonly tokens: Tokens,
    private readonly clock: Clock,
  ) {}

  private mac(text: string): Promise<string> {
    this.key ??= serverKey(this.db, 'dashboard_key');
    return this.key.then((k) => createHmac('sha256', k).update(text).digest('base64url'));
  }

  /** A new session value for an authenticated principal. */
  async create(p: Principal): Promise<string> {
    const body = `v1.${p.tokenId}.${this.clock.now().getTime() + SESSION_MS}`;
    return `${body}.${await this.mac(body)}`;
  }

  /** The principal of a session value, or null (malformed, forged, expired, revoked, wrong scope). */
  async principal(value: string | undefined): Promise<Principal | null> {
    const m = value === undefined ? null : /^(v1\.(\d{1,15})\.(\d{1,15}))\.([A-Za-z0-9_-]{43})$/.exec(value);
    if (!m) return null;
    if (!same(await this.mac(m[1]!), m[4]!)) return null;
    if (Number(m[3]) <= this.clock.now().getTime()) return null;
    const p = await this.tokens.principalById(Number(m[2]));
    return p && (p.scope === 'admin' || p.scope === 'user') ? p : null;
  }

  /** The CSRF token for forms of this session. */
  csrf(session: string): Promise<string> {
    return this.mac(`csrf.${session}`);
  }

  async csrfValid(session: string, token: unknown): Promise<boolean> {
    return typeof token === 'string' && same(await this.csrf(session), token);
  }
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The session cookie of a request. */
export function sessionCookie(req: FastifyRequest): string | undefined {
  const header = req.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function setSessionCookie(req: FastifyRequest, reply: FastifyReply, value: string | null): void {
  const secure = req.protocol === 'https' ? '; Secure' : '';
  const life = value === null ? 'Max-Age=0' : `Max-Age=${SESSION_MS / 1000}`;
  void reply.header(
    'set-cookie',
    `${COOKIE}=${value ?? ''}; Path=/dashboard; HttpOnly; SameSite=Strict; ${life}${secure}`,
  );
}

/** A state-changing request must come from a page of this server (when the browser says where from). */
export function sameOrigin(req: FastifyRequest): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  return origin === `${req.protocol}://${req.host}`;
}
