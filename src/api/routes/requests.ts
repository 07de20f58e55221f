// Container requests: submit (one or a batch), list, get, cancel, change priority.
import type { FastifyInstance } from 'fastify';
import { normalizeRequest, ValidationError, type FieldProblem } from '../../model/request.js';
import { ownerScope, who } from '../auth.js';
import { HttpError } from '../errors.js';
import {
  BatchInput,
  CancelRequestBody,
  IdParams,
  PriorityPatch,
  RequestInput,
  RequestListQuery,
} from '../schemas.js';
import type { ApiDeps } from '../server.js';
import { pageArgs } from './paging.js';

const USERS = ['user', 'admin'] as const;

export function requestRoutes(app: FastifyInstance, { store }: ApiDeps): void {
  app.post(
    '/v1/requests',
    {
      schema: { body: RequestInput, tags: ['requests'], summary: 'Submit a container request' },
      config: { scopes: USERS },
    },
    async (req, reply) => {
      const spec = normalizeRequest(req.body as Record<string, unknown>);
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
      const specs = (req.body as { requests: Record<string, unknown>[] }).requests.map((r, i) => {
        try {
          return normalizeRequest(r, `requests.${i}.`);
        } catch (err) {
          if (err instanceof ValidationError) problems.push(...err.details);
          else throw err;
          return null;
        }
      });
      if (problems.length > 0) throw new ValidationError(problems);
      const items = await store.requests.create(
        who(req).owner,
        specs.map((s) => s!),
      );
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
      const q = req.query as Record<string, string | undefined>;
      const p = who(req);
      const mine = ownerScope(p);
      if (mine !== null && q.owner !== undefined && q.owner !== mine) {
        throw new HttpError(403, 'forbidden', `owner: a user token may only list its own requests (${mine})`);
      }
      return store.requests.list({
        ...pageArgs(q),
        owner: mine ?? q.owner,
        state: q.state as 'Committed' | 'Final' | undefined,
        name: q.name,
      });
    },
  );

  app.get(
    '/v1/requests/:id',
    {
      schema: { params: IdParams, tags: ['requests'], summary: 'Get a container request' },
      config: { scopes: USERS },
    },
    async (req) => store.requests.get((req.params as { id: string }).id, ownerScope(who(req))),
  );

  app.post(
    '/v1/requests/:id/cancel',
    {
      schema: {
        params: IdParams,
        body: CancelRequestBody,
        tags: ['requests'],
        summary: 'Cancel a container request',
      },
      config: { scopes: USERS },
    },
    async (req) => {
      const p = who(req);
      const reason = (req.body as { reason?: string }).reason ?? `cancelled by ${p.owner}`;
      return store.requests.cancel((req.params as { id: string }).id, ownerScope(p), reason);
    },
  );

  app.patch(
    '/v1/requests/:id',
    {
      schema: {
        params: IdParams,
        body: PriorityPatch,
        tags: ['requests'],
        summary: 'Change priority (0 withdraws)',
      },
      config: { scopes: USERS },
    },
    async (req) => {
      const { priority } = req.body as { priority: number };
      return store.requests.setPriority((req.params as { id: string }).id, ownerScope(who(req)), priority);
    },
  );
}
