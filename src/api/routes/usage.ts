// Right-sizing over the API (GET /v1/usage, `berth usage`): per request name (or owner), what completed
// containers asked for, what they used, and what src/model/rightsize.ts suggests. A user sees their own
// containers, an admin everyone's (or one owner's).
import { ValidationError } from '../../model/request.js';
import { rightSize } from '../../model/rightsize.js';
import { parseTime, UnitError } from '../../model/units.js';
import { ownerScope, who } from '../auth.js';
import { HttpError } from '../errors.js';
import { UsageQuery } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';

/** The `since` parameter: the schema checks its length and characters, the model its time. */
function sinceOf(text: string | undefined): Date | null {
  if (text === undefined) return null;
  try {
    return parseTime(text);
  } catch (err) {
    if (err instanceof UnitError) throw new ValidationError([{ field: 'since', problem: err.message }]);
    throw err;
  }
}

export function usageRoutes(app: Api, { store }: ApiDeps): void {
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
      const q = req.query;
      const mine = ownerScope(who(req));
      if (mine !== null && q.owner !== undefined && q.owner !== mine)
        throw new HttpError(403, 'forbidden', `owner: a user token may only see its own usage (${mine})`);
      const since = sinceOf(q.since);
      const by = q.by ?? 'name';
      const groups = await store.usage.aggregate({ by, owner: mine ?? q.owner ?? null, since });
      return { by, since, items: groups.map(rightSize) };
    },
  );
}
