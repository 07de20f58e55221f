// Right-sizing over the API (GET /v1/usage, `berth usage`): per request name (or owner), what completed
// containers asked for, what they used, and what src/model/rightsize.ts suggests. A user sees their own
// containers, an admin everyone's (or one owner's).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ValidationError } from '../../model/request.js';
import { rightSize } from '../../model/rightsize.js';
import { parseTime, UnitError } from '../../model/units.js';
import { ownerScope, who } from '../auth.js';
import { HttpError } from '../errors.js';
import type { ApiDeps } from '../server.js';

const UsageQuery = Type.Object(
  {
    by: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('owner')])),
    owner: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    since: Type.Optional(
      Type.String({ maxLength: 64, description: 'RFC 3339 time: containers finished since' }),
    ),
  },
  { additionalProperties: false },
);

export function usageRoutes(app: FastifyInstance, { store }: ApiDeps): void {
  app.get(
    '/v1/usage',
    {
      schema: {
        querystring: UsageQuery,
        tags: ['containers'],
        summary: 'Right-sizing: per request name (or owner), what completed containers asked for and used',
      },
      config: { scopes: ['user', 'admin'] },
    },
    async (req) => {
      const q = req.query as { by?: 'name' | 'owner'; owner?: string; since?: string };
      const mine = ownerScope(who(req));
      if (mine !== null && q.owner !== undefined && q.owner !== mine)
        throw new HttpError(403, 'forbidden', `owner: a user token may only see its own usage (${mine})`);
      let since: Date | null = null;
      if (q.since !== undefined) {
        try {
          since = parseTime(q.since);
        } catch (err) {
          if (err instanceof UnitError) throw new ValidationError([{ field: 'since', problem: err.message }]);
          throw err;
        }
      }
      const by = q.by ?? 'name';
      const groups = await store.usage.aggregate({ by, owner: mine ?? q.owner ?? null, since });
      return { by, since, items: groups.map(rightSize) };
    },
  );
}
