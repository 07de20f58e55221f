// An API on a fresh database, called in-process (fastify inject), with a token of every scope.
import { afterAll } from 'vitest';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApi, type ApiOptions } from '../../src/api/server.js';
import { testStore } from './store.js';

export async function testApi(options: Omit<ApiOptions, 'store'> = {}) {
  const { store, clock, db } = await testStore();
  const app = await buildApi({ store, ...options });
  afterAll(async () => {
    const closing = app.close();
    // A listening test's client may hold a keep-alive connection whose answer the server is still finishing
    // (fastify keeps one open 72 s): it must not hold the close.
    app.server.closeAllConnections();
    await closing;
  });
  const admin = (await store.tokens.create({ scope: 'admin', owner: 'root' })).secret;
  const alice = (await store.tokens.create({ scope: 'user', owner: 'alice' })).secret;
  const bob = (await store.tokens.create({ scope: 'user', owner: 'bob' })).secret;
  const dispatcher = (await store.tokens.create({ scope: 'dispatcher', owner: 'dispatch' })).secret;
  const call = (token: string | null, opts: InjectOptions) =>
    app.inject({
      ...opts,
      headers: { ...(opts.headers ?? {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    });
  /** A node with its node token, registered through the API. */
  const node = async (instanceId = `i-${Math.random().toString(36).slice(2, 10)}`) => {
    const created = await call(dispatcher, {
      method: 'POST',
      url: '/v1/nodes',
      payload: { cluster: 'c1', dispatcher_tag: 't1', instance_id: instanceId, instance_type: 'small' },
    });
    const { node: n, bootstrap_secret } = created.json();
    const reg = await call(null, {
      method: 'POST',
      url: '/v1/nodes/register',
      payload: { node_id: n.id, secret: bootstrap_secret },
    });
    return { id: n.id as string, token: reg.json().token as string, instanceId };
  };
  /**
   * The dispatcher locks a Queued container and assigns it to the node; returns the per-lock token. Throws
   * when either is refused (a test that expects a refusal calls the API itself).
   */
  const place = async (cid: string, n: { id: string; instanceId: string }, dispatcherId = 'd-1') => {
    const lock = (
      await call(dispatcher, {
        method: 'POST',
        url: '/v1/containers/lock',
        payload: { dispatcher_id: dispatcherId, ids: [cid] },
      })
    ).json();
    if (lock.locks?.length !== 1) throw new Error(`lock of ${cid} refused: ${JSON.stringify(lock)}`);
    const assigned = await call(dispatcher, {
      method: 'POST',
      url: `/v1/containers/${cid}/assign`,
      payload: { dispatcher_id: dispatcherId, instance_id: n.instanceId, node_id: n.id },
    });
    if (assigned.statusCode !== 200)
      throw new Error(`assign of ${cid}: ${assigned.statusCode} ${assigned.body}`);
    return lock.locks[0].token as string;
  };
  /** Alice submits one request; its id and its container's. */
  const submit = async (payload: Record<string, unknown>) => {
    const r = (await call(alice, { method: 'POST', url: '/v1/requests', payload })).json();
    return { rid: r.id as string, cid: r.container_id as string };
  };
  return {
    app: app as FastifyInstance,
    store,
    clock,
    db,
    tokens: { admin, alice, bob, dispatcher },
    call,
    node,
    place,
    submit,
  };
}
