// Logs: the agent appends chunks; users read them, or follow them over Server-Sent Events until the
// container has ended and every chunk has been sent.
import { who } from '../auth.js';
import { HttpError } from '../errors.js';
import { ContainerParams, LogAppendBody, LogQuery } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { visibleContainer } from './containers.js';
import { followLog, openSse } from '../log-follow.js';
import { report } from './reports.js';
import { intQuery } from './paging.js';

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
      const after = n.after ?? -1;
      const limit = n.limit ?? 1000;
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
