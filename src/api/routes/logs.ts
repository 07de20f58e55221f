// Logs: the agent appends chunks; users read them, or follow them over Server-Sent Events until the
// container has ended and every chunk has been sent.
import { isFinalContainerState } from '../../model/types.js';
import { who } from '../auth.js';
import { HttpError } from '../errors.js';
import { ContainerParams, LogAppendBody, LogQuery } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { visibleContainer } from './containers.js';
import { report } from './reports.js';
import { intQuery } from './paging.js';

/** How often a follower looks for new chunks when no notification arrives. */
const FOLLOW_POLL_MS = 250;

export function logRoutes(app: Api, deps: ApiDeps): void {
  const { store } = deps;

  app.post(
    '/v1/containers/:id/logs',
    {
      schema: {
        params: ContainerParams,
        body: LogAppendBody,
        tags: ['agent'],
        summary: 'Append log chunks (idempotent by seq)',
      },
      config: { scopes: ['node'] },
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req) => {
      const node = who(req).nodeId;
      if (node === null) throw new HttpError(403, 'forbidden', 'this token is not bound to a node');
      const b = req.body;
      const o = await report(deps, {
        kind: 'logs',
        id: req.params.id,
        node,
        token: b.lock_token,
        chunks: b.chunks,
      });
      return { appended: 'appended' in o ? o.appended : 0 };
    },
  );

  app.get(
    '/v1/containers/:id/logs',
    {
      schema: {
        params: ContainerParams,
        querystring: LogQuery,
        tags: ['containers'],
        summary: 'Read logs; follow=true streams them (SSE)',
      },
      config: { scopes: ['user', 'admin'] },
    },
    async (req, reply) => {
      const q = req.query;
      const cid = req.params.id;
      await visibleContainer(deps, who(req), cid);
      const n = intQuery(q, { after: [-1, 2147483647], limit: [1, 1000] });
      let after = n.after ?? -1;
      const limit = n.limit ?? 1000;
      if (q.follow !== 'true' && q.follow !== '1') return { items: await store.logs.read(cid, after, limit) };

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      let closed = false;
      req.raw.on('close', () => (closed = true));
      const wake = deps.waiter('berth_logs', cid);
      try {
        while (!closed && !deps.closing()) {
          // Read the state before the chunks: if it was final before we read, we have every chunk.
          const final = isFinalContainerState((await store.containers.get(cid)).state);
          const chunks = await store.logs.read(cid, after, 1000);
          for (const ch of chunks) {
            res.write(`id: ${ch.seq}\nevent: log\ndata: ${JSON.stringify(ch)}\n\n`);
            after = ch.seq;
          }
          if (chunks.length === 1000) continue;
          if (final) {
            const c = await store.containers.get(cid);
            res.write(`event: end\ndata: ${JSON.stringify({ state: c.state, exit_code: c.exit_code })}\n\n`);
            break;
          }
          await wake.next(FOLLOW_POLL_MS);
        }
      } catch (err) {
        req.log.warn({ err }, 'log follow ended by an error');
      } finally {
        wake.close();
        res.end();
      }
    },
  );
}
