// Management API (admin): the instances the dispatchers run, and hold/drain/run/kill requests.
import { InstanceActionParams, InstanceParams } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';

export function instanceRoutes(app: Api, { store }: ApiDeps): void {
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
    {
      schema: { params: InstanceParams, tags: ['admin'], summary: 'One instance' },
      config: { scopes: ['admin'] },
    },
    async (req) => store.instances.get(req.params.id),
  );
  app.post(
    '/v1/instances/:id/:action',
    {
      schema: {
        params: InstanceActionParams,
        tags: ['admin'],
        summary:
          'hold (no new work, never shut down), drain (no new work, shut down when empty), run (normal), kill (shut down now)',
      },
      config: { scopes: ['admin'] },
    },
    async (req) => {
      const { id, action } = req.params;
      return store.instances.request(id, action === 'kill' ? { kill: true } : { idleBehavior: action });
    },
  );
}
