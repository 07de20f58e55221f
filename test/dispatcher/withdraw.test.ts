// The dispatcher and the store together (real PostgreSQL, sim cloud) on the two request-ending rules of
// issue 10 items 12 and 13: a container no configured type can ever run uses one attempt, not all of
// them; and priority 0 leaves a Queued container unscheduled, unlocks a Locked one and kills a Running one.
import { describe, expect, it } from 'vitest';
import { harness } from './harness.js';

describe('requests that no retry can help', () => {
  it('--gpus 1 with no GPU type: cancelled once (perm, not retryable) and the request is Final at once', async () => {
    const h = await harness();
    const d = h.make();
    const [id] = await h.submit({ gpus: 1, container_count_max: 5 });
    await h.pass(d);
    await h.pass(d);
    const c = await h.store.containers.get(id!);
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'perm' });
    const r = await h.store.requests.get(c.request_id);
    expect(r).toMatchObject({ state: 'Final', outcome: 'failed', attempts: 1, container_id: id });
    expect(r.final_reason).toBe('needs 1 gpus; largest configured type has 0 (not retryable)');
    const all = await h.store.containerList.list({ requestId: c.request_id });
    expect(all.items).toHaveLength(1);
    expect(h.cloud.live).toBe(0);
  });
});

describe('priority 0 (DESIGN §3.1, §6.2)', () => {
  it('a Queued container at 0 is not scheduled (no lock, no instance); raised again it runs', async () => {
    const h = await harness();
    const d = h.make();
    const [id] = await h.submit({ vcpus: 1, ram: '1GiB', priority: 0 });
    await h.pass(d);
    const c = await h.store.containers.get(id!);
    expect(c).toMatchObject({ state: 'Queued', priority: 0 });
    expect(h.cloud.live).toBe(0);
    await h.store.requests.setPriority(c.request_id, null, 10);
    await h.pass(d);
    expect(await h.state(id!)).toBe('Locked');
  });

  it('a Running container set to 0 is killed and its request ends cancelled, with the new priority shown', async () => {
    const h = await harness();
    const d = h.make();
    const [id] = await h.submit({ vcpus: 1, ram: '1GiB' });
    await h.pass(d);
    await h.advance(60_000);
    await h.pass(d);
    await h.pingAll();
    expect(await h.state(id!)).toBe('Running');
    const c = await h.store.containers.get(id!);
    const r = await h.store.requests.setPriority(c.request_id, null, 0);
    expect(r).toMatchObject({ state: 'Committed', priority: 0 });
    await h.pass(d);
    expect(await h.store.containers.get(id!)).toMatchObject({ state: 'Cancelled', failure_class: 'user' });
    expect(await h.store.requests.get(c.request_id)).toMatchObject({
      state: 'Final',
      outcome: 'cancelled',
      priority: 0,
    });
  });
});
