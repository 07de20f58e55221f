// Management API (admin): the instances the dispatchers run, and hold/drain/run/kill requests.
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { IdParams } from '../schemas.js';
import type { ApiDeps } from '../server.js';

const ActionParams = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 128 }),
    action: Type.Union([
      Type.Literal('hold'),
      Type.Literal('drain'),
      Type.Literal('run'),
      Type.Literal('kill'),
    ]),
  },
  { additionalProperties: false },
);

export function instanceRoutes(app: FastifyInstance, { store }: ApiDeps): void {
  app.get(
    '/v1/instances',
    {
      schema: { tags: ['admin'], summary: "Instances in the dispatchers' view" },
      config: { scopes: ['admin'] },
    },
    async () => ({
      items: await store.instances.list(),
    }),
  );
  app.get(
    '/v1/instances/:id',
    { schema: { params: IdParams, tags: ['admin'], summary: 'One instance' }, config: { scopes: ['admin'] } },
    async (req) => store.instances.get((req.params as { id: string }).id),
  );
  app.post(
    '/v1/instances/:id/:action',
    {
      schema: {
        params: ActionParams,
        tags: ['admin'],
        summary:
          'hold (no new work, never shut down), drain (no new work, shut down when empty), run (normal), kill (shut down now)',
      },
      config: { scopes: ['admin'] },
    },
    async (req) => {
      const { id, action } = req.params as { id: string; action: 'hold' | 'drain' | 'run' | 'kill' };
      return store.instances.request(id, action === 'kill' ? { kill: true } : { idleBehavior: action });
    },
  );
}
