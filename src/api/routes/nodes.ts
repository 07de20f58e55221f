// Nodes: the dispatcher records one per instance; the agent registers with its one-time bootstrap
// secret and then pings. A ping is a long poll: it answers at once when there is work, else when work
// is assigned (a notification) or `wait` passes.
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { who } from '../auth.js';
import { HttpError, REFUSAL_STATUS } from '../errors.js';
import { IdParams, NodeCreateBody, RegisterBody, ReportsBody } from '../schemas.js';
import type { ApiDeps } from '../server.js';
import type { UsageSample } from '../../store/containers.js';
import type { LogChunk } from '../../store/logs.js';
import type { Usage } from '../../store/records.js';
import type { Report, ReportOutcome } from '../../store/reports.js';

/** One report as the API takes it (ReportsBody). */
type ApiReport = { id: string; lock_token: string } & (
  | { kind: 'start' }
  | { kind: 'logs'; chunks: LogChunk[] }
  | { kind: 'exit'; exit_code: number; oom_killed?: boolean; usage?: Usage | null; reason?: string }
  | { kind: 'cancel'; class: 'temp' | 'perm'; reason: string }
);

/** The store's report for an API report of `node`. */
export function toReport(r: ApiReport, node: string): Report {
  const base = { id: r.id, node, token: r.lock_token };
  switch (r.kind) {
    case 'start':
      return { ...base, kind: 'start' };
    case 'logs':
      return { ...base, kind: 'logs', chunks: r.chunks };
    case 'exit':
      return {
        ...base,
        kind: 'end',
        end: {
          state: 'Complete',
          exitCode: r.exit_code,
          oomKilled: r.oom_killed ?? false,
          usage: r.usage ?? null,
          reason: r.reason ?? null,
        },
      };
    case 'cancel':
      return { ...base, kind: 'end', end: { state: 'Cancelled', failureClass: r.class, reason: r.reason } };
  }
}

/** A report's result as the API answers it: done (with the chunks appended, for logs) or why not. */
function result(o: ReportOutcome) {
  if (o.ok) return 'appended' in o ? { id: o.id, ok: true, appended: o.appended } : { id: o.id, ok: true };
  return { id: o.id, ok: false, error: { status: REFUSAL_STATUS[o.code], code: o.code, message: o.reason } };
}

const PingBody = Type.Object(
  {
    state: Type.Union([
      Type.Literal('idle'),
      Type.Literal('busy'),
      Type.Literal('draining'),
      Type.Literal('drained'),
    ]),
    running: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 10000 })),
    wait_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 60000 })),
    /** The latest usage sample of each running container (stored on the container until its exit). */
    usage: Type.Optional(
      Type.Record(
        Type.String({ maxLength: 64 }),
        Type.Object(
          {
            cpu_seconds: Type.Number({ minimum: 0 }),
            ram: Type.Integer({ minimum: 0 }),
            peak_ram: Type.Integer({ minimum: 0 }),
          },
          { additionalProperties: false },
        ),
        { maxProperties: 10000 },
      ),
    ),
  },
  { additionalProperties: false },
);

export function nodeRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { store } = deps;

  app.post(
    '/v1/nodes',
    {
      schema: {
        body: NodeCreateBody,
        tags: ['dispatcher'],
        summary: 'Record a node for a new instance; returns its bootstrap secret',
      },
      config: { scopes: ['dispatcher', 'admin'] },
    },
    async (req, reply) => {
      const b = req.body as {
        cluster: string;
        dispatcher_tag: string;
        instance_id: string;
        instance_type: string;
      };
      const { node, bootstrapSecret } = await store.nodes.create({
        cluster: b.cluster,
        dispatcherTag: b.dispatcher_tag,
        instanceId: b.instance_id,
        instanceType: b.instance_type,
      });
      return reply.status(201).send({ node, bootstrap_secret: bootstrapSecret });
    },
  );

  app.post(
    '/v1/nodes/register',
    {
      schema: {
        body: RegisterBody,
        tags: ['agent'],
        summary: 'Exchange the one-time bootstrap secret for a node token',
      },
    },
    async (req, reply) => {
      const b = req.body as { node_id: string; secret: string; info?: Record<string, unknown> };
      const { node, token } = await store.nodes.register(b.node_id, b.secret, b.info ?? {});
      return reply.status(201).send({ node, token });
    },
  );

  app.get(
    '/v1/nodes',
    { schema: { tags: ['admin'], summary: 'List nodes' }, config: { scopes: ['admin', 'dispatcher'] } },
    async () => ({
      items: await store.nodes.list({ includeFailed: true }),
    }),
  );

  app.get(
    '/v1/nodes/:id',
    {
      schema: { params: IdParams, tags: ['admin'], summary: 'Get a node' },
      config: { scopes: ['admin', 'dispatcher', 'node'] },
    },
    async (req) => {
      const p = who(req);
      const id = (req.params as { id: string }).id;
      if (p.scope === 'node' && p.nodeId !== id)
        throw new HttpError(403, 'forbidden', 'a node token may only read its own node');
      return store.nodes.get(id);
    },
  );

  app.post(
    '/v1/nodes/:id/ping',
    {
      schema: {
        params: IdParams,
        body: PingBody,
        tags: ['agent'],
        summary: 'Report state; receive containers to start and to kill',
      },
      config: { scopes: ['node'] },
    },
    async (req) => {
      const p = who(req);
      const id = (req.params as { id: string }).id;
      if (p.nodeId !== id) throw new HttpError(403, 'forbidden', 'a node token may only ping its own node');
      const b = req.body as {
        state: 'idle' | 'busy' | 'draining' | 'drained';
        running?: string[];
        wait_ms?: number;
        usage?: Record<string, UsageSample>;
      };
      const waiter = deps.waiter('berth_node', id);
      try {
        let node = await store.nodes.ping(id, b.state);
        if (b.usage) await store.containers.recordUsage(id, b.usage);
        // Only this ping's own list counts (not after the long wait below: by then it may be stale); a
        // ping without a list says nothing about what the node runs.
        if (b.running) await store.containers.cancelUnknownToAgent(id, b.running);
        let work = await store.containers.workFor(id, b.running ?? []);
        if (work.start.length === 0 && work.kill.length === 0 && (b.wait_ms ?? 0) > 0) {
          await waiter.next(b.wait_ms!);
          if (deps.closing())
            throw new HttpError(503, 'unavailable', 'the server is stopping; ping again shortly');
          node = await store.nodes.get(id);
          work = await store.containers.workFor(id, b.running ?? []);
        }
        return { node, start: work.start, kill: work.kill, drain: node.state === 'draining' };
      } finally {
        waiter.close();
      }
    },
  );

  app.post(
    '/v1/nodes/:id/reports',
    {
      schema: {
        params: IdParams,
        body: ReportsBody,
        tags: ['agent'],
        summary: 'Report starts, log chunks, exits and cancels of containers on this node, in one call',
      },
      config: { scopes: ['node'] },
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req) => {
      const p = who(req);
      const id = (req.params as { id: string }).id;
      if (p.nodeId !== id)
        throw new HttpError(403, 'forbidden', 'a node token may only report for its own node');
      const b = req.body as { reports: ApiReport[] };
      const out = await store.reports.send(b.reports.map((r) => toReport(r, id)));
      return { results: out.map(result) };
    },
  );
}
