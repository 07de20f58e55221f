// What work cost (docs/COST.md): a summary grouped by owner, request, name, instance type or label over a
// window, and the cost of one request's attempts. A user sees their own work; an admin everyone's, with
// the instances' side (what they cost, and what no container carries).
import { Type } from '@sinclair/typebox';
import { ValidationError } from '../../model/request.js';
import { parseTime } from '../../model/units.js';
import type { CostBy } from '../../store/cost.js';
import { ownerScope, who } from '../auth.js';
import { HttpError } from '../errors.js';
import { RequestParams } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { intQuery } from './paging.js';

const BY_PATTERN = '^(owner|request|name|type|label:[A-Za-z][A-Za-z0-9_.:/=+@-]{0,62})$';

const CostQuery = Type.Object(
  {
    since: Type.Optional(Type.String({ maxLength: 64, description: 'RFC 3339 time; default: all time' })),
    until: Type.Optional(Type.String({ maxLength: 64, description: 'RFC 3339 time; default: now' })),
    by: Type.Optional(
      Type.String({
        pattern: BY_PATTERN,
        description: 'owner (default), request, name (numbered series together), type, or label:KEY',
      }),
    ),
    owner: Type.Optional(Type.String({ maxLength: 256 })),
    limit: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,5}$', description: 'groups listed, 1-10000 (default 100)' }),
    ),
  },
  { additionalProperties: false },
);

/** A time query parameter, or a field-named error. */
function time(q: Partial<Record<string, string>>, name: string): Date | undefined {
  const v = q[name];
  if (v === undefined) return undefined;
  try {
    return parseTime(v);
  } catch (err) {
    throw new ValidationError([{ field: name, problem: (err as Error).message }]);
  }
}

export function costRoutes(app: Api, { store }: ApiDeps): void {
  app.get(
    '/v1/cost',
    {
      schema: { querystring: CostQuery, tags: ['cost'], summary: 'What work cost, grouped (docs/COST.md)' },
      config: { scopes: ['user', 'admin'] },
    },
    async (req) => {
      const q = req.query;
      const p = who(req);
      const mine = ownerScope(p);
      if (mine !== null && q.owner !== undefined && q.owner !== mine)
        throw new HttpError(403, 'forbidden', `owner: a user token may only see its own costs (${mine})`);
      const limit = intQuery(q, { limit: [1, 10_000] }).limit ?? 100;
      const from = time(q, 'since') ?? null;
      const to = time(q, 'until');
      if (from && to && from >= to)
        throw new ValidationError([{ field: 'until', problem: 'expected a time after since' }]);
      return store.costs.summary({ from, to }, (q.by ?? 'owner') as CostBy, mine ?? q.owner ?? null, limit);
    },
  );

  app.get(
    '/v1/requests/:id/cost',
    {
      schema: { params: RequestParams, tags: ['cost'], summary: "What a request's attempts cost so far" },
      config: { scopes: ['user', 'admin'] },
    },
    async (req) => {
      const id = req.params.id;
      await store.requests.get(id, ownerScope(who(req)));
      const items = await store.costs.ofRequest(id);
      return { request: id, cost: items.reduce((n, c) => n + c.cost, 0), items };
    },
  );
}
