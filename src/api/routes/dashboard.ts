// The dashboard (docs/DASHBOARD.md): server-rendered pages under /dashboard, signed in with an API token
// (a session cookie, src/web/session.ts), live through Server-Sent Events, and the operator's instance
// buttons. Its routes live in their own fastify context: form bodies and HTML error pages apply here only.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { isId } from '../../model/ids.js';
import { NotFoundError, UnauthorizedError } from '../../store/errors.js';
import { HttpError } from '../errors.js';
import type { Principal } from '../../store/tokens.js';
import type { Html } from '../../web/html.js';
import { messagePage, page } from '../../web/layout.js';
import { cost } from '../../web/pages/cost.js';
import { INSTANCE_ACTIONS, instances, type InstanceAction } from '../../web/pages/instances.js';
import { overview } from '../../web/pages/overview.js';
import { queue } from '../../web/pages/queue.js';
import { request, requests } from '../../web/pages/requests.js';
import { signinPage } from '../../web/pages/signin.js';
import { Sessions, sameOrigin, sessionCookie, setSessionCookie } from '../../web/session.js';
import { SAMPLE_INTERVAL_MS } from '../../web/sampler.js';
import { staticDir } from '../../web/static.js';
import { ViewError, type View, type ViewContext } from '../../web/view.js';
import { who, type FailureThrottle } from '../auth.js';
import { followLog, openSse } from '../log-follow.js';
import type { ApiDeps } from '../server.js';

/** Views by the name the live endpoint takes. */
const VIEWS: Record<string, View> = { overview, queue, instances, requests, request, cost };

function viewNamed(name: string | undefined): View | null {
  return name !== undefined && Object.hasOwn(VIEWS, name) ? VIEWS[name]! : null;
}

/** How often a live page is re-rendered at most, and at least (without notifications). */
const LIVE_MIN_MS = 1_000;
const LIVE_MAX_MS = 2_000;
/** A rendered region's identity: what the page showed, compared with each live render. */
const fingerprint = (text: string): string =>
  createHash('sha256').update(text).digest('base64url').slice(0, 22);
/** A live stream re-checks its session this often (a revoked token ends it). */
const LIVE_RECHECK_MS = 30_000;
/** Lines of log a request page starts with. */
const LOG_TAIL = 200;
/** The charts' ranges, and the most points a series has. */
const CHART_HOURS = [1, 6, 24];
const CHART_POINTS = 720;

/** Security headers of every dashboard response: no framing, no inline script, no referrer to other sites. */
const HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // same-origin, not no-referrer: with no-referrer, browsers send "Origin: null" on form posts.
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

interface Session {
  principal: Principal;
  value: string;
  csrf: string;
}

const STATIC: Record<string, [string, string]> = {
  'dashboard.css': ['text/css; charset=utf-8', 'dashboard.css'],
  'dashboard.js': ['text/javascript; charset=utf-8', 'dashboard.js'],
  'uplot.js': ['text/javascript; charset=utf-8', 'uplot:uPlot.iife.min.js'],
  'uplot.css': ['text/css; charset=utf-8', 'uplot:uPlot.min.css'],
};

const staticCache = new Map<string, Buffer>();

/** The pages' route options: for a browser, not operations of the API (left out of /openapi.json). */
const PAGE = { config: { page: true } };

/** A static file: ours from web/static, the charting library from its package. */
function readStatic(file: string): Buffer {
  let data = staticCache.get(file);
  if (!data) {
    data = file.startsWith('uplot:')
      ? readFileSync(createRequire(import.meta.url).resolve(`uplot/dist/${file.slice('uplot:'.length)}`))
      : readFileSync(join(staticDir(), file));
    staticCache.set(file, data);
  }
  return data;
}

export function dashboardRoutes(app: FastifyInstance, deps: ApiDeps, throttle: FailureThrottle): void {
  const { store } = deps;
  const sessions = new Sessions(store.ctx.pool, store.tokens, store.ctx.clock);
  const now = () => store.ctx.clock.now();

  // API: a one-time sign-in link for the caller's own token (berth dashboard).
  app.post(
    '/v1/dashboard/signin-links',
    {
      schema: {
        body: Type.Optional(Type.Object({}, { additionalProperties: false })),
        tags: ['dashboard'],
        summary: 'A link that signs its holder in to the dashboard once, within 10 minutes, as this token',
      },
      config: { scopes: ['user', 'admin'] },
    },
    async (req, reply) => {
      const { code, expires_at } = await store.dashboard.createSignin(who(req));
      return reply.status(201).send({ path: `/dashboard/signin?code=${code}`, expires_at });
    },
  );

  app.register(
    async (scope) => {
      scope.addContentTypeParser(
        'application/x-www-form-urlencoded',
        { parseAs: 'string', bodyLimit: 16 * 1024 },
        (_req, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
      );
      scope.addHook('onSend', async (_req, reply, payload) => {
        for (const [k, v] of Object.entries(HEADERS)) if (!reply.hasHeader(k)) void reply.header(k, v);
        return payload;
      });
      // The pages read their query, path and form as text for the database, which holds no NUL character.
      scope.addHook('preHandler', async (req) => {
        for (const [where, values] of [
          ['query', req.query],
          ['path', req.params],
          ['form', req.body],
        ] as const)
          for (const [name, v] of Object.entries((values ?? {}) as Record<string, unknown>))
            if (typeof v === 'string' && v.includes('\u0000'))
              throw new HttpError(400, 'bad_request', `${where} field ${name} contains a NUL character`, [
                { field: name, problem: 'expected text without NUL characters' },
              ]);
      });
      scope.setNotFoundHandler((req, reply) =>
        sendPage(reply, 404, messagePage(frame(null), 'Not found', `no page ${req.url.split('?')[0]}`)),
      );
      scope.setErrorHandler((err, req, reply) => {
        const e = err as Error & { statusCode?: number; validation?: unknown };
        // HttpError: refused before the page ran (e.g. a URL that is not valid percent-encoding: checkUrl).
        const status = err instanceof HttpError ? err.status : e.statusCode;
        if (status && status < 500) {
          const detail = err instanceof HttpError ? err.details.map((d) => `${d.field}: ${d.problem}`) : [];
          return sendPage(
            reply,
            status,
            messagePage(frame(null), 'Bad request', [e.message, ...detail].join('; ')),
          );
        }
        req.log.error({ err }, 'dashboard error');
        return sendPage(reply, 500, messagePage(frame(null), 'Something went wrong', 'see the server log'));
      });

      /** The signed-in session of a request, or null. */
      async function session(req: FastifyRequest): Promise<Session | null> {
        const value = sessionCookie(req);
        const principal = await sessions.principal(value);
        if (!principal || value === undefined) return null;
        req.principal = principal;
        return { principal, value, csrf: await sessions.csrf(value) };
      }

      const frame = (s: Session | null) => ({
        nav: null,
        principal: s?.principal ?? null,
        csrf: s?.csrf ?? null,
        title: 'Berth',
      });

      function sendPage(reply: FastifyReply, status: number, body: Html) {
        return reply.status(status).type('text/html; charset=utf-8').send(body.text);
      }

      /** The sign-in page, remembering where to go after it (only pages of the dashboard). */
      function toSignin(req: FastifyRequest, reply: FastifyReply) {
        const next = req.url.startsWith('/dashboard') ? req.url : '/dashboard';
        return reply.redirect(`/dashboard/signin?next=${encodeURIComponent(next)}`, 303);
      }

      function context(req: FastifyRequest, s: Session, params: Record<string, string>): ViewContext {
        return {
          store,
          principal: s.principal,
          now: now(),
          query: req.query as Record<string, string | undefined>,
          params,
          csrf: s.csrf,
        };
      }

      /** A full page of a view (or its error page). */
      async function showView(
        req: FastifyRequest,
        reply: FastifyReply,
        name: string,
        params: Record<string, string> = {},
      ) {
        const s = await session(req);
        if (!s) return toSignin(req, reply);
        const view = viewNamed(name)!;
        const f = { ...frame(s), nav: view.nav };
        if (view.adminOnly && s.principal.scope !== 'admin')
          return sendPage(
            reply,
            403,
            messagePage(
              f,
              'Admins only',
              `${view.title(context(req, s, params))} are shown to admin tokens.`,
            ),
          );
        const v = context(req, s, params);
        try {
          const [body, log] = await Promise.all([view.body(v), view.log ? view.log(v) : null]);
          const q = new URLSearchParams(req.query as Record<string, string>);
          q.set('view', name);
          if (params.id) q.set('id', params.id);
          // What the page shows, so its live stream sends the region only once it differs from that.
          q.set('seen', fingerprint(body.text));
          return sendPage(
            reply,
            200,
            page(
              { ...f, title: view.title(v), live: `/dashboard/live?${q}`, charts: view.charts, log },
              body,
            ),
          );
        } catch (err) {
          if (err instanceof ViewError)
            return sendPage(reply, err.status, messagePage(f, err.heading, err.message));
          throw err;
        }
      }

      scope.get('/', PAGE, (req, reply) => showView(req, reply, 'overview'));
      scope.get('/queue', PAGE, (req, reply) => showView(req, reply, 'queue'));
      scope.get('/instances', PAGE, (req, reply) => showView(req, reply, 'instances'));
      scope.get('/requests', PAGE, (req, reply) => showView(req, reply, 'requests'));
      scope.get('/cost', PAGE, (req, reply) => showView(req, reply, 'cost'));
      scope.get('/requests/:id', PAGE, (req, reply) =>
        showView(req, reply, 'request', { id: (req.params as { id: string }).id }),
      );

      // A container's page is its request's, scrolled to the attempt.
      scope.get('/containers/:id', PAGE, async (req, reply) => {
        const s = await session(req);
        if (!s) return toSignin(req, reply);
        const id = (req.params as { id: string }).id;
        const c = isId('c', id) ? await store.containers.get(id).catch(() => null) : null;
        if (!c || (s.principal.scope !== 'admin' && c.owner !== s.principal.owner))
          return sendPage(
            reply,
            404,
            messagePage(frame(s), 'Not found', `container ${id} not found (or not yours)`),
          );
        return reply.redirect(`/dashboard/requests/${c.request_id}#${c.id}`, 303);
      });

      // Live updates: the view's region re-rendered, sent when it changed.
      scope.get('/live', PAGE, async (req, reply) => {
        let s = await session(req);
        if (!s) return reply.status(401).type('text/plain').send('sign in first');
        const q = req.query as Record<string, string | undefined>;
        const view = viewNamed(q.view);
        if (!view) return reply.status(400).type('text/plain').send('view: expected a dashboard page name');
        if (view.adminOnly && s.principal.scope !== 'admin')
          return reply.status(403).type('text/plain').send('admins only');
        const params: Record<string, string> = q.id ? { id: q.id } : {};
        const sse = openSse(req, reply, HEADERS);
        const wake = deps.waiter('berth_dispatch', null);
        // The page's own render (its fingerprint in the URL), not the stream's first render, is what the
        // browser shows: a change between the two is sent, however late the stream opens.
        let last = q.seen ?? '';
        let checked = now().getTime();
        try {
          while (!sse.closed() && !deps.closing()) {
            const started = Date.now();
            if (now().getTime() - checked >= LIVE_RECHECK_MS) {
              s = await session(req);
              if (!s) {
                sse.send('signout', {});
                break;
              }
              checked = now().getTime();
            }
            const body = (await view.body(context(req, s, params))).text;
            const seen = fingerprint(body);
            if (seen !== last) sse.send('html', body);
            else sse.comment('unchanged');
            last = seen;
            await wake.next(LIVE_MAX_MS);
            const spent = Date.now() - started;
            if (spent < LIVE_MIN_MS) await new Promise((r) => setTimeout(r, LIVE_MIN_MS - spent));
          }
        } catch (err) {
          if (err instanceof ViewError) sse.send('gone', { message: err.message });
          else req.log.warn({ err }, 'live dashboard stream ended by an error');
        } finally {
          wake.close();
          sse.end();
        }
      });

      // A container's log: its last lines, then new ones as they come, until it ends.
      scope.get('/containers/:id/log', PAGE, async (req, reply) => {
        const s = await session(req);
        if (!s) return reply.status(401).type('text/plain').send('sign in first');
        const id = (req.params as { id: string }).id;
        const c = isId('c', id) ? await store.containers.get(id).catch(() => null) : null;
        if (!c || (s.principal.scope !== 'admin' && c.owner !== s.principal.owner))
          return reply.status(404).type('text/plain').send('not found');
        const tail = await store.dashboard.logTail(id, LOG_TAIL);
        const sse = openSse(req, reply, HEADERS);
        try {
          for (const ch of tail) sse.send('log', ch, ch.seq);
          await followLog(deps, id, tail.at(-1)?.seq ?? -1, sse.send, sse.closed);
        } catch (err) {
          req.log.warn({ err }, 'dashboard log follow ended by an error');
        } finally {
          sse.end();
        }
      });

      // The charts' data (admins): the server's samples over the last hours.
      scope.get('/charts.json', PAGE, async (req, reply) => {
        const s = await session(req);
        if (!s) return reply.status(401).send({ error: 'sign in first' });
        if (s.principal.scope !== 'admin') return reply.status(403).send({ error: 'admins only' });
        const hours = Number((req.query as { hours?: string }).hours ?? 6);
        if (!CHART_HOURS.includes(hours))
          return reply.status(400).send({ error: `hours: expected ${CHART_HOURS.join(', ')}` });
        // At most CHART_POINTS points per series, whatever the range.
        const samples = await store.dashboard.samples(
          new Date(now().getTime() - hours * 3_600_000),
          Math.max(SAMPLE_INTERVAL_MS, (hours * 3_600_000) / CHART_POINTS),
        );
        return { now: now(), hours, samples };
      });

      // Hold / drain / run / kill an instance (admins): the management API's operator request.
      scope.post('/instances/:id/:action', PAGE, async (req, reply) => {
        const s = await session(req);
        if (!s) return toSignin(req, reply);
        const body = (req.body ?? {}) as Record<string, string | undefined>;
        const token = req.headers['x-csrf-token'] ?? body._csrf;
        if (!sameOrigin(req) || !(await sessions.csrfValid(s.value, token)))
          return sendPage(
            reply,
            403,
            messagePage(
              frame(s),
              'Refused',
              'this form is stale or came from another site; reload the page and try again',
            ),
          );
        if (s.principal.scope !== 'admin')
          return sendPage(
            reply,
            403,
            messagePage(frame(s), 'Admins only', 'only admin tokens may operate instances'),
          );
        const { id, action } = req.params as { id: string; action: string };
        if (!INSTANCE_ACTIONS.includes(action as InstanceAction))
          return sendPage(
            reply,
            400,
            messagePage(frame(s), 'Bad action', `action: expected ${INSTANCE_ACTIONS.join(', ')}`),
          );
        try {
          await store.instances.request(
            id,
            action === 'kill'
              ? { kill: true }
              : { idleBehavior: action as InstanceAction & ('hold' | 'drain' | 'run') },
            s.principal.owner,
          );
        } catch (err) {
          if (err instanceof NotFoundError)
            return sendPage(reply, 404, messagePage(frame(s), 'Not found', `instance ${id} is not live`));
          throw err;
        }
        req.log.info(
          { instance: id, action, owner: s.principal.owner },
          'instance action from the dashboard',
        );
        if (req.headers['x-csrf-token']) return reply.send({ ok: true });
        return reply.redirect(`/dashboard/instances#${id}`, 303);
      });

      // Signing in: with a token pasted in the form, or a one-time link.
      scope.get('/signin', PAGE, async (req, reply) => {
        const q = req.query as { code?: string; next?: string };
        if (q.code !== undefined) {
          let tokenId: number;
          try {
            tokenId = await store.dashboard.useSignin(q.code);
          } catch (err) {
            if (!(err instanceof NotFoundError)) throw err;
            return sendPage(reply, 401, signinPage({ next: '/dashboard', error: err.message }));
          }
          const p = await store.tokens.principalById(tokenId);
          if (!p)
            return sendPage(
              reply,
              401,
              signinPage({ next: '/dashboard', error: 'the token of this link was revoked' }),
            );
          setSessionCookie(req, reply, await sessions.create(p));
          return reply.redirect('/dashboard', 303);
        }
        return sendPage(reply, 200, signinPage({ next: safeNext(q.next) }));
      });

      scope.post('/signin', PAGE, async (req, reply) => {
        const body = (req.body ?? {}) as Record<string, string | undefined>;
        const next = safeNext(body.next);
        if (!sameOrigin(req))
          return sendPage(reply, 403, signinPage({ next, error: 'sign in from this server’s own page' }));
        const secret = (body.token ?? '').trim();
        await throttle.wait(req.ip, now().getTime());
        let p: Principal;
        try {
          if (!secret) throw new UnauthorizedError('paste an API token (bt_…)');
          p = await store.tokens.authenticate(secret);
        } catch (err) {
          if (!(err instanceof UnauthorizedError)) throw err;
          throttle.fail(req.ip, now().getTime());
          return sendPage(
            reply,
            401,
            signinPage({ next, error: `That token does not work: ${err.message}.` }),
          );
        }
        throttle.succeed(req.ip);
        if (p.scope !== 'user' && p.scope !== 'admin')
          return sendPage(
            reply,
            403,
            signinPage({ next, error: `A ${p.scope} token cannot sign in: use a user or admin token.` }),
          );
        setSessionCookie(req, reply, await sessions.create(p));
        return reply.redirect(next, 303);
      });

      scope.post('/signout', PAGE, async (req, reply) => {
        setSessionCookie(req, reply, null);
        return reply.redirect('/dashboard/signin', 303);
      });

      scope.get('/static/:file', PAGE, async (req, reply) => {
        const file = (req.params as { file: string }).file;
        const entry = Object.hasOwn(STATIC, file) ? STATIC[file] : undefined;
        if (!entry) return reply.status(404).type('text/plain').send('not found');
        return reply
          .type(entry[0])
          .header('cache-control', 'public, max-age=86400')
          .send(readStatic(entry[1]));
      });
    },
    { prefix: '/dashboard' },
  );
}

/** Where to go after signing in: a dashboard page of this server, nothing else (no open redirect). */
function safeNext(next: string | undefined): string {
  return next && /^\/dashboard(\/[\w\-./?=&%#]*)?$/.test(next) && !next.includes('//') ? next : '/dashboard';
}
