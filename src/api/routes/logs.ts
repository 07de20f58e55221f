// Logs: the agent appends chunks; users read them, or follow them over Server-Sent Events until the
// container has ended and every chunk has been sent.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { who } from '../auth.js';
import { HttpError } from '../errors.js';
import { IdParams, LogAppendBody, LogQuery } from '../schemas.js';
import type { ApiDeps } from '../server.js';
import { visibleContainer } from './containers.js';
import type { LogChunk } from '../../store/logs.js';
import { followLog, openSse } from '../log-follow.js';

export function logRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { store } = deps;
  const id = (req: FastifyRequest) => (req.params as { id: string }).id;

  app.post(
    '/v1/containers/:id/logs',
    {
      schema: {
        params: IdParams,
        body: LogAppendBody,
        tags: ['agent'],
        summary: 'Append log chunks (idempotent by seq)',
      },
      config: { scopes: ['node'] },
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req) => {
      const p = who(req);
      const b = req.body as { lock_token: string; chunks: LogChunk[] };
      const c = await visibleContainer(deps, p, id(req));
      if (!(await store.containers.tokenValid(c.id, b.lock_token))) {
        throw new HttpError(
          409,
          'conflict',
          `stale lock token for container ${c.id}: it was unlocked, cancelled or re-locked since`,
        );
      }
      return { appended: await store.logs.append(c.id, b.chunks) };
    },
  );

  app.get(
    '/v1/containers/:id/logs',
    {
      schema: {
        params: IdParams,
        querystring: LogQuery,
        tags: ['containers'],
        summary: 'Read logs; follow=true streams them (SSE)',
      },
      config: { scopes: ['user', 'admin'] },
    },
    async (req, reply) => {
      const q = req.query as { after?: string; limit?: string; follow?: string };
      const cid = id(req);
      await visibleContainer(deps, who(req), cid);
      const after = q.after === undefined ? -1 : Number(q.after);
      const limit = q.limit === undefined ? 1000 : Math.min(1000, Math.max(1, Number(q.limit)));
      if (q.follow !== 'true' && q.follow !== '1') return { items: await store.logs.read(cid, after, limit) };

      const sse = openSse(req, reply);
      try {
        await followLog(deps, cid, after, sse.send, sse.closed);
      } catch (err) {
        req.log.warn({ err }, 'log follow ended by an error');
      } finally {
        sse.end();
      }
    },
  );
}
