// Nodes: the dispatcher records one per instance; the agent registers with its one-time bootstrap
// secret and then pings. A ping is a long poll: it answers at once when there is work, else when work
// is assigned (a notification) or `wait` passes.
import { who } from '../auth.js';
import { HttpError } from '../errors.js';
import { NextBody, NodeCreateBody, NodeParams, PingBody, RegisterBody, ReportsBody } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { reportResult, sendReports, toReport } from './reports.js';

export function nodeRoutes(app: Api, deps: ApiDeps): void {
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
      const b = req.body;
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
        summary:
          'Exchange the one-time bootstrap secret for a node token (one-shot: and start its container)',
      },
    },
    async (req, reply) => {
      const b = req.body;
      const { node, token } = await store.nodes.register(b.node_id, b.secret, b.info ?? {});
      const once = b.once;
      if (!once) return reply.status(201).send({ node, token });
      // A one-shot agent: its container, if Locked to this node, started as its start report would (the
      // same transition and lock token check); otherwise none, and the agent's first ping says why. The
      // node is registered by now: a failure here must not lose its token (the secret is used up), so it
      // answers without an order and the agent's ping and start report do it the ordinary way.
      const start = await (async () => {
        const order = await store.containers.startOrderFor(node.id, once);
        if (!order) return [];
        const [started] = await sendReports(deps, [
          toReport({ kind: 'start', id: order.id, lock_token: order.lock_token }, node.id),
        ]);
        return started!.ok ? [{ ...order, started: true }] : [];
      })().catch((err: unknown) => {
        req.log.warn(
          { err, container: once },
          "starting a one-shot agent's container at registration failed",
        );
        return [];
      });
      return reply.status(201).send({ node, token, start });
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
      schema: { params: NodeParams, tags: ['admin'], summary: 'Get a node' },
      config: { scopes: ['admin', 'dispatcher', 'node'] },
    },
    async (req) => {
      const p = who(req);
      const id = req.params.id;
      if (p.scope === 'node' && p.nodeId !== id)
        throw new HttpError(403, 'forbidden', 'a node token may only read its own node');
      return store.nodes.get(id);
    },
  );

  app.post(
    '/v1/nodes/:id/ping',
    {
      schema: {
        params: NodeParams,
        body: PingBody,
        tags: ['agent'],
        summary: 'Report state; receive containers to start and to kill',
      },
      config: { scopes: ['node'] },
    },
    async (req) => {
      const p = who(req);
      const id = req.params.id;
      if (p.nodeId !== id) throw new HttpError(403, 'forbidden', 'a node token may only ping its own node');
      const b = req.body;
      const waiter = deps.waiter('berth_node', id);
      try {
        let node = await store.nodes.ping(id, b.state, b.notice ?? null, b.reclaims ?? null);
        if (b.usage) await store.containers.recordUsage(id, b.usage);
        if (b.paused && b.running) await store.pauses.report(id, b.running, b.paused);
        // Only this ping's own list counts (not after the long wait below: by then it may be stale); a
        // ping without a list says nothing about what the node runs.
        if (b.running) await store.containers.cancelUnknownToAgent(id, b.running);
        let work = await store.containers.workFor(id, b.running ?? [], b.paused);
        const idle = (w: typeof work) =>
          w.start.length + w.kill.length + w.pause.length + w.resume.length === 0;
        if (idle(work) && (b.wait_ms ?? 0) > 0) {
          await waiter.next(b.wait_ms!);
          if (deps.closing())
            throw new HttpError(503, 'unavailable', 'the server is stopping; ping again shortly');
          node = await store.nodes.get(id);
          work = await store.containers.workFor(id, b.running ?? [], b.paused);
        }
        return { node, ...work, drain: node.state === 'draining' };
      } finally {
        waiter.close();
      }
    },
  );

  app.post(
    '/v1/nodes/:id/next',
    {
      schema: {
        params: NodeParams,
        body: NextBody,
        tags: ['agent'],
        summary:
          "A SLURM job's one-shot agent, its container reported: the next container that fits its allocation, already started (none: the job ends)",
      },
      config: { scopes: ['node'] },
    },
    async (req) => {
      const id = req.params.id;
      if (who(req).nodeId !== id)
        throw new HttpError(403, 'forbidden', 'a node token may only ask for work for its own node');
      return { start: await store.containers.nextInAllocation(id) };
    },
  );

  app.post(
    '/v1/nodes/:id/reports',
    {
      schema: {
        params: NodeParams,
        body: ReportsBody,
        tags: ['agent'],
        summary: 'Report starts, log chunks, exits and cancels of containers on this node, in one call',
      },
      config: { scopes: ['node'] },
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req) => {
      const id = req.params.id;
      if (who(req).nodeId !== id)
        throw new HttpError(403, 'forbidden', 'a node token may only report for its own node');
      const out = await sendReports(
        deps,
        req.body.reports.map((r) => toReport(r, id)),
      );
      return { results: out.map(reportResult) };
    },
  );
}
