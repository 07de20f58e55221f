// An API on a fresh database, called in-process (fastify inject), with a token of every scope.
import { afterAll } from 'vitest';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApi, type ApiOptions } from '../../src/api/server.js';
import { testStore } from './store.js';

export async function testApi(options: Omit<ApiOptions, 'store'> = {}) {
  const { store, clock, db } = await testStore();
  const app = await buildApi({ store, ...options });
  afterAll(() => app.close());
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
  return {
    app: app as FastifyInstance,
    store,
    clock,
    db,
    tokens: { admin, alice, bob, dispatcher },
    call,
    node,
  };
}
