// Management API (admin): the instances the dispatchers run, and hold/drain/run/kill requests (a hold may
// freeze what runs on the instance, and its run or drain resumes it: Instances.request).
import { who } from '../auth.js';
import { InstanceActionBody, InstanceActionParams, InstanceParams } from '../schemas.js';
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
        body: InstanceActionBody,
        tags: ['admin'],
        summary:
          'hold (no new work, never shut down; freeze: and freeze its Running containers), drain (no new work, shut down when empty), run (normal), kill (shut down now); run and drain resume what a hold froze',
      },
      config: { scopes: ['admin'] },
      // No body at all (older clients, curl -X POST) is a plain request: checked as {}.
      preValidation: async (req) => {
        req.body ??= {};
      },
    },
    async (req) => {
      const { id, action } = req.params;
      const freeze = req.body.freeze === true;
      return store.instances.request(
        id,
        action === 'kill' ? { kill: true, freeze } : { idleBehavior: action, freeze },
        who(req).owner,
      );
    },
  );
}
