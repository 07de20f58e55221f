// berth pause / berth resume: freeze a Running container where it stands and let it run on (issue 16
// item 4; the flags and their delivery to the agent are src/store/pause.ts).
import { who } from '../auth.js';
import { ContainerParams } from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { visibleContainer } from './containers.js';

export function pauseRoutes(app: Api, deps: ApiDeps): void {
  for (const [verb, want] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    app.post(
      `/v1/containers/:id/${verb}`,
      {
        schema: {
          params: ContainerParams,
          tags: ['containers'],
          summary: want
            ? 'Freeze a Running container where it stands (admin or owner)'
            : 'Let a paused container run on (admin or owner)',
        },
        config: { scopes: ['user', 'admin'] },
      },
      async (req) => {
        const p = who(req);
        // Someone else's container looks absent, as everywhere in the API.
        await visibleContainer(deps, p, req.params.id);
        await deps.store.pauses.request(req.params.id, want, p);
        return deps.store.containers.get(req.params.id);
      },
    );
  }
}
