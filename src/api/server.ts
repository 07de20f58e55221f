// The HTTP API (DESIGN §2, §4): fastify with schema validation, bearer auth, one error shape,
// /healthz, /metrics and /openapi.json.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { PROCESS_OPTIONS } from '../config/options.js';
import { silentLogger, type Logger } from '../log/logger.js';
import { systemTimers } from '../model/clock.js';
import type { Notifier, Waiter } from '../store/notifier.js';
import type { ContainerRecord } from '../store/records.js';
import type { Store } from '../store/store.js';
import { FailureThrottle, installAuth } from './auth.js';
import { errorBody, handleError } from './errors.js';
import { costMetrics } from './cost-metrics.js';
import { checkUrl, clientErrorHandler, frameworkErrors, MAX_PARAM_LENGTH } from './http-limits.js';
import { apiMetrics } from './metrics.js';
import { collectRoutes, openApiDocument } from './openapi.js';
import { checkpointRoutes } from './routes/checkpoints.js';
import { containerRoutes } from './routes/containers.js';
import { pauseRoutes } from './routes/pause.js';
import { costRoutes } from './routes/cost.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { instanceRoutes } from './routes/instances.js';
import { logRoutes } from './routes/logs.js';
import { nodeRoutes } from './routes/nodes.js';
import { requestRoutes } from './routes/requests.js';
import { tokenRoutes } from './routes/tokens.js';
import { usageRoutes } from './routes/usage.js';

export const API_VERSION = '0.1.0';

declare module 'fastify' {
  interface FastifyInstance {
    /** Resolves when no request handler is running (or after timeoutMs). */
    drain(timeoutMs: number): Promise<void>;
  }
}

/**
 * The fastify instance routes are added to: its type provider derives each handler's req.body, req.params
 * and req.query from the route's TypeBox schemas (src/api/schemas.ts), so handlers need no casts.
 */
export type Api = FastifyInstance<
  Server,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** What route modules need. */
export interface ApiDeps {
  store: Store;
  /** Waits for a notification (channel, payload) or a timeout; see Notifier.waiter. */
  waiter(channel: string, key: string | null): Waiter;
  /** True once the server is closing: long-running responses (log follows) end. */
  closing(): boolean;
  /** Called when an agent reported a container started (for the queue-to-start metric). */
  started(c: ContainerRecord): void;
}

export interface ApiOptions {
  store: Store;
  /** LISTEN/NOTIFY connection; without one, waiters simply time out (polling). */
  notifier?: Notifier | null;
  /** Extra metric registries to serve on /metrics (e.g. the dispatcher's, in `berth up`). */
  registries?: Registry[];
  /** The process's logger: errors, and one line per request at debug. Default: none. */
  logger?: Logger;
  /** Largest request body in bytes (default 1 MiB; batch and log routes allow 16 MiB). */
  bodyLimit?: number;
  /** Largest checkpoint an agent may upload (the `checkpoint_limit` option; default its declared default). */
  checkpointLimitBytes?: number;
  /** Slows down clients that fail to authenticate (default: 100 ms doubling to 2 s, real timers). */
  throttle?: FailureThrottle;
}

function pollingWaiter(): Waiter {
  let t: unknown = null;
  return {
    next: (ms) => new Promise((r) => (t = systemTimers.setTimeout(() => r([]), ms))),
    close: () => systemTimers.clearTimeout(t),
  };
}

export async function buildApi(opts: ApiOptions): Promise<FastifyInstance> {
  const logger: Logger = (opts.logger ?? silentLogger).child({ component: 'api' });
  const loggerInstance: FastifyBaseLogger = logger;
  const app: Api = Fastify({
    loggerInstance,
    // One line per request, at debug, from the onResponse hook below (fastify's own are two, at info).
    logController: new LogController({ disableRequestLogging: true }),
    // A child logger per request (bound to its request id) only when that line is written: above debug a
    // request logs nothing but an error, and a pino child per request was ~2% of a submission's server CPU.
    childLoggerFactory: (parent, bindings, childOpts) =>
      logger.isLevelEnabled('debug') ? parent.child(bindings, childOpts) : parent,
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    // Strict validation: no type coercion, no silent removal of unknown fields, every problem reported
    // (verbose: each error carries its schema and value, so errors.ts can say what was expected).
    ajv: {
      customOptions: {
        coerceTypes: false,
        removeAdditional: false,
        allErrors: true,
        useDefaults: false,
        verbose: true,
      },
    },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors,
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();
  const ops = collectRoutes(app);
  const metrics = apiMetrics(opts.store);
  let closing = false;
  const deps: ApiDeps = {
    store: opts.store,
    waiter: (channel, key) => opts.notifier?.waiter(channel, key) ?? pollingWaiter(),
    closing: () => closing,
    started: (c) => {
      if (c.started_at) metrics.queueToStart.observe((c.started_at.getTime() - c.queued_at.getTime()) / 1000);
    },
  };
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Handlers still running when the server closes (long polls woken by the closing notifier) must end
  // before the caller closes the database: count them, and let drain() wait for zero.
  let inFlight = 0;
  let idle: (() => void) | null = null;
  app.addHook('onRequest', async () => {
    inFlight++;
  });
  app.addHook('onResponse', async () => {
    if (--inFlight === 0) idle?.();
  });
  app.decorate('drain', async (timeoutMs: number) => {
    if (inFlight <= 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      idle = () => {
        clearTimeout(t);
        resolve();
      };
    });
  });
  costMetrics(opts.store, metrics.registry);
  app.addHook('onRequest', checkUrl);
  app.setErrorHandler(handleError);
  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send(errorBody('not_found', `no route ${req.method} ${req.url.split('?')[0]}`));
  });
  const throttle = opts.throttle ?? new FailureThrottle();
  installAuth(app, opts.store.tokens, throttle, () => opts.store.ctx.clock.now().getTime());
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unknown';
    metrics.http.inc({ method: req.method, route, status: String(reply.statusCode) });
    metrics.httpSeconds.observe({ route }, reply.elapsedTime / 1000);
    // The path without its query string; tokens travel in headers, never logged.
    req.log.debug(
      {
        method: req.method,
        path: req.url.split('?')[0],
        route,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request',
    );
  });

  app.get(
    '/healthz',
    { schema: { tags: ['system'], summary: 'Liveness and database reachability' } },
    async (_req, reply) => {
      try {
        await opts.store.ctx.pool.query('SELECT 1');
        return { ok: true, database: 'up' };
      } catch {
        return reply.status(503).send({ ok: false, database: 'down' });
      }
    },
  );
  app.get(
    '/metrics',
    { schema: { tags: ['system'], summary: 'Prometheus metrics' } },
    async (_req, reply) => {
      const parts = [await metrics.registry.metrics()];
      for (const r of opts.registries ?? []) parts.push(await r.metrics());
      return reply.type('text/plain; version=0.0.4').send(parts.join('\n'));
    },
  );
  requestRoutes(app, deps);
  containerRoutes(app, deps);
  pauseRoutes(app, deps);
  logRoutes(app, deps);
  // At least 1 byte: fastify takes no 0 (a limit of 0 turns checkpoints off; every upload is then refused).
  checkpointRoutes(
    app,
    deps,
    Math.max(1, opts.checkpointLimitBytes ?? PROCESS_OPTIONS.defaultOf('checkpoint_limit')),
  );
  nodeRoutes(app, deps);
  tokenRoutes(app, deps);
  instanceRoutes(app, deps);
  costRoutes(app, deps);
  dashboardRoutes(app, deps, throttle);
  usageRoutes(app, deps);
  let doc: Record<string, unknown> | null = null;
  app.get(
    '/openapi.json',
    { schema: { tags: ['system'], summary: 'This document' } },
    async () => (doc ??= openApiDocument(ops, API_VERSION)),
  );
  await app.ready();
  return app;
}
