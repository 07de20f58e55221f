// Whether an instance lends room to opportunistic containers comes from its node (issue 16): the agent's
// ping says whether its pressure watcher runs (`reclaims`), and the dispatcher carries it into the
// scheduler's snapshot, the one place the lending rule reads it (src/dispatch/scheduler/opportunistic.ts).
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Snapshot } from '../../src/dispatch/scheduler/types.js';
import { harness } from './harness.js';

describe("an instance's reclaims in the dispatcher's snapshot", () => {
  it("follows its node's last word: absent until its agent says it reclaims, then true, then absent again", async () => {
    const h = await harness();
    const seen: Snapshot[] = [];
    const d = h.make({ planner: (s) => (seen.push(s), plan(s)) });
    const [id] = await h.submit({ vcpus: 1, ram: '1GiB' });
    await h.pass(d);
    await h.advance(30_000);
    await h.pass(d);
    await h.pingAll();
    expect(await h.state(id!)).toBe('Running');
    const agent = [...h.agents.values()][0]!;
    const reclaims = async () => {
      await h.pass(d);
      const inst = seen.at(-1)!.instances.find((i) => i.id === agent.instanceId)!;
      return inst.reclaims;
    };
    expect(await reclaims()).toBeUndefined();
    await h.store.nodes.ping(agent.nodeId, 'busy', null, true);
    expect(await reclaims()).toBe(true);
    await h.store.nodes.ping(agent.nodeId, 'busy'); // a ping that does not say changes nothing
    expect(await reclaims()).toBe(true);
    await h.store.nodes.ping(agent.nodeId, 'busy', null, false);
    expect(await reclaims()).toBeUndefined();
  });
});
