// Containers: list, get, cancel, events; the dispatcher's lock/unlock/assign; the agent's start/complete.
import type { FastifyRequest } from 'fastify';
import { NotFoundError } from '../../store/errors.js';
import type { ContainerRecord } from '../../store/records.js';
import type { Principal } from '../../store/tokens.js';
import { ownerScope, who } from '../auth.js';
import { HttpError } from '../errors.js';
import {
  AssignBody,
  CancelBody,
  CompleteBody,
  ContainerListQuery,
  ContainerParams,
  LockBody,
  TokenBody,
  UnlockBody,
} from '../schemas.js';
import type { Api, ApiDeps } from '../server.js';
import { pageArgs } from './paging.js';
import { report, toReport } from './reports.js';

const READERS = ['user', 'admin', 'dispatcher', 'node'] as const;

/** Fetches a container the principal may see; anything else looks absent (no probing other users' ids). */
export async function visibleContainer(deps: ApiDeps, p: Principal, id: string): Promise<ContainerRecord> {
  const c = await deps.store.containers.get(id);
  const visible =
    p.scope === 'admin' ||
    p.scope === 'dispatcher' ||
    (p.scope === 'user' && c.owner === p.owner) ||
    (p.scope === 'node' && c.node_id === p.nodeId);
  if (!visible) throw new NotFoundError(`container ${id} not found`);
  return c;
}

/** A dispatcher token bound to one dispatcher id may act only as that dispatcher. */
function dispatcherId(p: Principal, claimed: string): string {
  if (p.scope === 'dispatcher' && p.dispatcherId !== null && p.dispatcherId !== claimed) {
    throw new HttpError(
      403,
      'forbidden',
      `dispatcher_id: this token belongs to dispatcher ${p.dispatcherId}`,
    );
  }
  return claimed;
}

function nodeOf(req: FastifyRequest): string {
  const p = who(req);
  if (p.nodeId === null) throw new HttpError(403, 'forbidden', 'this token is not bound to a node');
  return p.nodeId;
}

export function containerRoutes(app: Api, deps: ApiDeps): void {
  const { store } = deps;

  app.get(
    '/v1/containers',
    {
      schema: {
        querystring: ContainerListQuery,
        tags: ['containers'],
        summary: 'List containers, newest first',
      },
      config: { scopes: ['user', 'admin', 'dispatcher'] },
    },
    async (req) => {
      const q = req.query;
      const p = who(req);
      const mine = p.scope === 'dispatcher' ? null : ownerScope(p);
      if (mine !== null && q.owner !== undefined && q.owner !== mine) {
        throw new HttpError(
          403,
          'forbidden',
          `owner: a user token may only list its own containers (${mine})`,
        );
      }
      return store.containerList.list({
        ...pageArgs(q),
        owner: mine ?? q.owner,
        state: q.state,
        requestId: q.request_id,
        nodeId: q.node_id,
      });
    },
  );

  app.get(
    '/v1/containers/:id',
    {
      schema: { params: ContainerParams, tags: ['containers'], summary: 'Get a container' },
      config: { scopes: READERS },
    },
    async (req) => {
      const c = await visibleContainer(deps, who(req), req.params.id);
      // Whether its request has a kept checkpoint (size, time): never its bytes (routes/checkpoints.ts).
      const k = (await store.checkpoints.infoOf([c.request_id])).get(c.request_id);
      return { ...c, checkpoint: k ? { bytes: k.bytes, at: k.at, container_id: k.container_id } : null };
    },
  );

  app.get(
    '/v1/containers/:id/events',
    {
      schema: { params: ContainerParams, tags: ['containers'], summary: "A container's event log" },
      config: { scopes: ['user', 'admin', 'dispatcher'] },
    },
    async (req) => {
      await visibleContainer(deps, who(req), req.params.id);
      return { items: await store.containerList.events(req.params.id) };
    },
  );

  app.post(
    '/v1/containers/:id/cancel',
    {
      schema: {
        params: ContainerParams,
        body: CancelBody,
        tags: ['containers'],
        summary: 'Cancel a container (with a failure class)',
      },
      config: { scopes: READERS },
    },
    async (req) => {
      const p = who(req);
      const body = req.body;
      const cid = req.params.id;
      const retryable = {
        retryable: body.retryable ?? true,
        interrupted: body.interrupted ?? false,
        reclaimed: body.reclaimed ?? false,
      };
      if (p.scope === 'user' || p.scope === 'admin') {
        if (p.scope === 'user' && body.class !== undefined && body.class !== 'user') {
          throw new HttpError(403, 'forbidden', 'class: a user may only cancel with class "user"');
        }
        await visibleContainer(deps, p, cid);
        await store.containers.cancel(
          cid,
          { kind: 'user', owner: ownerScope(p) },
          body.class ?? 'user',
          body.reason ?? `cancelled by ${p.owner}`,
          retryable,
        );
      } else if (p.scope === 'dispatcher') {
        if (!body.dispatcher_id)
          throw new HttpError(400, 'invalid', 'dispatcher_id is required', [
            { field: 'dispatcher_id', problem: 'is required' },
          ]);
        await store.containers.cancel(
          cid,
          { kind: 'dispatcher', dispatcherId: dispatcherId(p, body.dispatcher_id) },
          body.class ?? 'perm',
          body.reason ?? 'cancelled by dispatcher',
          retryable,
        );
      } else {
        if (!body.lock_token)
          throw new HttpError(400, 'invalid', 'lock_token is required', [
            { field: 'lock_token', problem: 'is required' },
          ]);
        const end = {
          state: 'Cancelled' as const,
          failureClass: body.class ?? 'temp',
          reason: body.reason ?? 'cancelled by agent',
          ...retryable,
        };
        await report(deps, { kind: 'end', id: cid, node: nodeOf(req), token: body.lock_token, end });
      }
      return store.containers.get(cid);
    },
  );

  app.post(
    '/v1/containers/lock',
    {
      schema: {
        body: LockBody,
        tags: ['dispatcher'],
        summary: 'Lock Queued containers (by id, or the next N in queue order)',
      },
      config: { scopes: ['dispatcher', 'admin'] },
    },
    async (req) => {
      const b = req.body;
      const d = dispatcherId(who(req), b.dispatcher_id);
      if ((b.ids === undefined) === (b.limit === undefined)) {
        throw new HttpError(400, 'invalid', 'give exactly one of ids or limit', [
          { field: 'ids', problem: 'give exactly one of ids or limit' },
        ]);
      }
      const locks = b.ids
        ? await store.containers.lock(b.ids, d)
        : await store.containers.lockNext(d, b.limit!);
      return { locks };
    },
  );

  app.post(
    '/v1/containers/:id/unlock',
    {
      schema: {
        params: ContainerParams,
        body: UnlockBody,
        tags: ['dispatcher'],
        summary: 'Give a Locked container back to the queue',
      },
      config: { scopes: ['dispatcher', 'admin'] },
    },
    async (req) => {
      const b = req.body;
      await store.containers.unlock(req.params.id, dispatcherId(who(req), b.dispatcher_id), b.reason);
      return store.containers.get(req.params.id);
    },
  );

  app.post(
    '/v1/containers/:id/assign',
    {
      schema: {
        params: ContainerParams,
        body: AssignBody,
        tags: ['dispatcher'],
        summary: 'Place a Locked container on an instance',
      },
      config: { scopes: ['dispatcher', 'admin'] },
    },
    async (req) => {
      const b = req.body;
      await store.containers.assign(
        req.params.id,
        dispatcherId(who(req), b.dispatcher_id),
        b.instance_id,
        b.node_id ?? null,
      );
      return store.containers.get(req.params.id);
    },
  );

  app.post(
    '/v1/containers/:id/start',
    {
      schema: {
        params: ContainerParams,
        body: TokenBody,
        tags: ['agent'],
        summary: 'The agent reports that it started the container',
      },
      config: { scopes: ['node'] },
    },
    async (req) => {
      const token = req.body.lock_token;
      await report(deps, { kind: 'start', id: req.params.id, node: nodeOf(req), token });
      return store.containers.get(req.params.id);
    },
  );

  app.post(
    '/v1/containers/:id/complete',
    {
      schema: {
        params: ContainerParams,
        body: CompleteBody,
        tags: ['agent'],
        summary: 'The agent reports the exit code and usage',
      },
      config: { scopes: ['node'] },
    },
    async (req) => {
      await report(deps, toReport({ kind: 'exit', id: req.params.id, ...req.body }, nodeOf(req)));
      return store.containers.get(req.params.id);
    },
  );
}
