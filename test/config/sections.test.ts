// One declaration, many readers: the simulator's file, the dispatch config file and a `berth plan`
// snapshot read the same declared keys, so the same value gets the same answer everywhere.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/declare.js';
import { loadConfig } from '../../src/config/options.js';
import { SCHEDULER_OPTIONS } from '../../src/config/scheduler.js';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { parseSnapshot, SnapshotError } from '../../src/dispatch/snapshot-json.js';
import { parseSimConfig } from '../../src/sim/config.js';

/** What the key at `path` was refused for. */
function problemOf(run: () => unknown): { path: string; problem: string } {
  try {
    run();
  } catch (err) {
    if (err instanceof ConfigError || err instanceof SnapshotError)
      return { path: err.path, problem: err.problem };
    throw err;
  }
  throw new Error('accepted');
}

const one = [{ name: 't1', vcpus: 1, ram: '1GiB', price: 1 }];

describe('shared declarations', () => {
  it('the scheduler keys: a snapshot, the dispatch config and the simulator give the same answer', () => {
    const bad = { idle_timeout: 'soon' };
    const snap = problemOf(() => parseSnapshot({ now: '2026-01-01T00:00:00Z', config: bad }));
    const disp = problemOf(() => parseDispatchConfig({ instance_types: one, scheduler: bad }));
    const sim = problemOf(() => parseSimConfig({ scheduler: bad }));
    expect(snap).toEqual({ path: 'config.idle_timeout', problem: disp.problem });
    expect(disp.path).toBe('scheduler.idle_timeout');
    expect(sim).toEqual(disp);
    const defaults = SCHEDULER_OPTIONS.defaults();
    expect(parseSimConfig({}).scheduler).toEqual(defaults);
    expect(parseSnapshot({ now: '2026-01-01T00:00:00Z' }).config).toEqual(defaults);
  });

  it("the simulator's limits and dispatcher timers are the dispatch config's, its ping interval the agent's", () => {
    expect(problemOf(() => parseSimConfig({ limits: { max_concurrent_creates: 0 } }))).toEqual({
      path: 'limits.max_concurrent_creates',
      problem: problemOf(() => parseDispatchConfig({ max_concurrent_creates: 0 })).problem,
    });
    expect(problemOf(() => parseSimConfig({ dispatcher: { sync_interval: 'often' } })).problem).toBe(
      problemOf(() => parseDispatchConfig({ sync_interval: 'often' })).problem,
    );
    expect(problemOf(() => parseSimConfig({ agent: { ping_interval: '61s' } }))).toEqual({
      path: 'agent.ping_interval',
      problem: problemOf(() => loadConfig({ ping_wait: '61s' }, { BERTH_HOME: '/nonexistent' })).problem,
    });
    // The simulator's own defaults where its context wants them; the declaration's elsewhere.
    const sim = parseSimConfig({});
    const disp = parseDispatchConfig({ instance_types: one });
    expect(sim.dispatcher.syncIntervalMs).toBe(300_000);
    expect(disp.syncIntervalMs).toBe(10_000);
    expect(sim.dispatcher.nodeLostAfterMs).toBe(disp.nodeLostAfterMs);
    expect(sim.limits).toEqual({ opsPerSecond: null, burst: null, maxConcurrentCreates: null });
  });
});
