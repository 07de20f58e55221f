// Bearer-token authentication and scope checks (DESIGN §4). Each route declares the scopes it admits in
// its config; a missing or unknown token is 401, a token of another scope 403.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Scope } from '../model/types.js';
import type { Principal, Tokens } from '../store/tokens.js';
import { HttpError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** Scopes admitted; absent = public (no token needed). */
    scopes?: readonly Scope[];
    /** A page for a browser (the dashboard's), not an operation of the API: left out of /openapi.json. */
    page?: boolean;
  }
}

/** Waits `ms` milliseconds (a timer; tests inject one that records and controls the wait). */
export type Sleep = (ms: number) => Promise<void>;

const timerSleep: Sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Slows down a client after repeated authentication failures: each failure adds a delay, capped. */
export class FailureThrottle {
  private readonly failures = new Map<string, { count: number; last: number }>();
  constructor(
    private readonly stepMs = 100,
    private readonly capMs = 2000,
    private readonly forgetMs = 60_000,
    private readonly sleep: Sleep = timerSleep,
  ) {}
  /** Waits the delay a client has earned by its failures (none for a client without recent ones). */
  async wait(client: string, nowMs: number): Promise<void> {
    const delay = this.delayFor(client, nowMs);
    if (delay > 0) await this.sleep(delay);
  }
  delayFor(client: string, nowMs: number): number {
    const f = this.failures.get(client);
    if (!f || nowMs - f.last > this.forgetMs) return 0;
    return Math.min(this.capMs, this.stepMs * 2 ** Math.min(10, f.count - 1));
  }
  fail(client: string, nowMs: number): void {
    const f = this.failures.get(client);
    if (!f || nowMs - f.last > this.forgetMs) this.failures.set(client, { count: 1, last: nowMs });
    else this.failures.set(client, { count: f.count + 1, last: nowMs });
    if (this.failures.size > 10_000) this.failures.clear();
  }
  succeed(client: string): void {
    this.failures.delete(client);
  }
}

export function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(\S+)$/i.exec(h);
  return m ? m[1]! : null;
}

export function installAuth(
  app: FastifyInstance,
  tokens: Tokens,
  throttle: FailureThrottle,
  nowMs: () => number,
): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (req) => {
    const scopes = req.routeOptions.config?.scopes;
    if (!scopes) return;
    const secret = bearer(req);
    const client = req.ip;
    await throttle.wait(client, nowMs());
    if (!secret) {
      throttle.fail(client, nowMs());
      throw new HttpError(401, 'unauthorized', 'missing bearer token (Authorization: Bearer TOKEN)');
    }
    try {
      req.principal = await tokens.authenticate(secret);
    } catch (err) {
      throttle.fail(client, nowMs());
      throw err;
    }
    throttle.succeed(client);
    if (!scopes.includes(req.principal.scope)) {
      throw new HttpError(
        403,
        'forbidden',
        `this operation needs a token with scope ${scopes.join(' or ')}; yours has scope ${req.principal.scope}`,
      );
    }
  });
}

/** The principal of an authenticated route (the hook guarantees it). */
export function who(req: FastifyRequest): Principal {
  if (!req.principal) throw new HttpError(401, 'unauthorized', 'missing bearer token');
  return req.principal;
}

/** The owner filter for a principal: admins see everything (null), users only their own. */
export function ownerScope(p: Principal): string | null {
  return p.scope === 'admin' ? null : p.owner;
}
