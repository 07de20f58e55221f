// Tokens (admin only): create, list, revoke. The secret appears only in the create response.
import { TokenCreateBody, TokenIdParams } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { who } from '../auth.js';

export function tokenRoutes(app: Api, { store }: ApiDeps): void {
  app.post(
    '/v1/tokens',
    {
      schema: {
        body: TokenCreateBody,
        tags: ['admin'],
        summary: 'Create a token (the secret is shown once)',
      },
      config: { scopes: ['admin'] },
    },
    async (req, reply) => {
      const b = req.body;
      const { secret, info } = await store.tokens.create({
        scope: b.scope,
        owner: b.owner,
        description: b.description,
        maxPriority: b.max_priority ?? null,
      });
      return reply.status(201).send({ token: secret, info });
    },
  );
  app.get(
    '/v1/tokens',
    {
      schema: { tags: ['admin'], summary: 'List tokens (never their secrets)' },
      config: { scopes: ['admin'] },
    },
    async () => ({
      items: await store.tokens.list(),
    }),
  );
  app.delete(
    '/v1/tokens/:id',
    {
      schema: { params: TokenIdParams, tags: ['admin'], summary: 'Revoke a token' },
      config: { scopes: ['admin'] },
    },
    async (req, reply) => {
      await store.tokens.revoke(Number(req.params.id));
      return reply.status(204).send();
    },
  );
  app.get(
    '/v1/whoami',
    {
      schema: { tags: ['system'], summary: 'The calling token’s scope and owner' },
      config: { scopes: ['admin', 'user', 'dispatcher', 'node'] },
    },
    async (req) => {
      const p = who(req);
      return { scope: p.scope, owner: p.owner, node_id: p.nodeId, max_priority: p.maxPriority };
    },
  );
}
