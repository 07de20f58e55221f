// Container requests: submit (one or a batch), list, get, cancel, change priority.
import {
  normalizeRequest,
  priorityProblem,
  ValidationError,
  type FieldProblem,
  type RequestSpec,
} from '../../model/request.js';
import { ownerScope, who } from '../auth.js';
import { HttpError } from '../errors.js';
import {
  BatchInput,
  CancelRequestBody,
  PriorityPatch,
  RequestInput,
  RequestListQuery,
  RequestParams,
} from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { pageArgs } from './paging.js';

const USERS = ['user', 'admin'] as const;

export function requestRoutes(app: Api, { store }: ApiDeps): void {
  app.post(
    '/v1/requests',
    {
      schema: { body: RequestInput, tags: ['requests'], summary: 'Submit a container request' },
      config: { scopes: USERS },
    },
    async (req, reply) => {
      const spec = normalizeRequest(req.body, { maxPriority: who(req).maxPriority });
      const [created] = await store.requests.create(who(req).owner, [spec]);
      return reply.status(201).send(created);
    },
  );

  app.post(
    '/v1/requests/batch',
    {
      schema: {
        body: BatchInput,
        tags: ['requests'],
        summary: 'Submit up to 1,000 container requests at once',
      },
      config: { scopes: USERS },
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req, reply) => {
      const problems: FieldProblem[] = [];
      const specs: RequestSpec[] = [];
      const { maxPriority } = who(req);
      req.body.requests.forEach((r, i) => {
        try {
          specs.push(normalizeRequest(r, { prefix: `requests.${i}.`, maxPriority }));
        } catch (err) {
          if (!(err instanceof ValidationError)) throw err;
          problems.push(...err.details);
        }
      });
      if (problems.length > 0) throw new ValidationError(problems);
      const items = await store.requests.create(who(req).owner, specs);
      return reply.status(201).send({ items });
    },
  );

  app.get(
    '/v1/requests',
    {
      schema: {
        querystring: RequestListQuery,
        tags: ['requests'],
        summary: 'List container requests, newest first',
      },
      config: { scopes: USERS },
    },
    async (req) => {
      const q = req.query;
      const mine = ownerScope(who(req));
      if (mine !== null && q.owner !== undefined && q.owner !== mine) {
        throw new HttpError(403, 'forbidden', `owner: a user token may only list its own requests (${mine})`);
      }
      return store.requests.list({ ...pageArgs(q), owner: mine ?? q.owner, state: q.state, name: q.name });
    },
  );

  app.get(
    '/v1/requests/:id',
    {
      schema: { params: RequestParams, tags: ['requests'], summary: 'Get a container request' },
      config: { scopes: USERS },
    },
    async (req) => store.requests.get(req.params.id, ownerScope(who(req))),
  );

  app.post(
    '/v1/requests/:id/cancel',
    {
      schema: {
        params: RequestParams,
        body: CancelRequestBody,
        tags: ['requests'],
        summary: 'Cancel a container request',
      },
      config: { scopes: USERS },
    },
    async (req) => {
      const p = who(req);
      return store.requests.cancel(
        req.params.id,
        ownerScope(p),
        req.body.reason ?? `cancelled by ${p.owner}`,
      );
    },
  );

  app.patch(
    '/v1/requests/:id',
    {
      schema: {
        params: RequestParams,
        body: PriorityPatch,
        tags: ['requests'],
        summary: 'Change priority (0: not scheduled, and killed if running)',
      },
      config: { scopes: USERS },
    },
    async (req) => {
      const p = who(req);
      const problem = priorityProblem(req.body.priority, p.maxPriority);
      if (problem) throw new ValidationError([problem]);
      return store.requests.setPriority(req.params.id, ownerScope(p), req.body.priority);
    },
  );
}
