// The slurm backend's pass as a pure function: one row of the decision table (plan.ts) per test.
import { describe, expect, it } from 'vitest';
import { parseSlurmConfig } from '../../../src/backends/slurm/config.js';
import {
  EMPTY_MEMORY,
  jobInstance,
  nextBackoff,
  planSlurm,
  type HeldContainer,
  type NodeInfo,
  type QueuedContainer,
  type SlurmSnapshot,
} from '../../../src/backends/slurm/plan.js';
import type { SlurmJob } from '../../../src/backends/slurm/squeue.js';

const NOW = new Date('2026-01-01T00:10:00Z');
const ago = (s: number) => new Date(NOW.getTime() - s * 1000);
const cfg = parseSlurmConfig({
  nice_spread: 10,
  lower_nice: true,
  node_lost_after: '60s',
  submit_grace: '30s',
  orphan_grace: '60s',
  max_jobs: 100,
  features: { big: 'bigmem' },
});

const held = (id: string, o: Partial<HeldContainer> = {}): HeldContainer => ({
  id,
  state: 'Locked',
  priority: 500,
  updatedAt: ago(5),
  nodeId: `n-${id}`,
  ...o,
});
const queued = (id: string, o: Partial<QueuedContainer> = {}): QueuedContainer => ({
  id,
  priority: 500,
  vcpus: 1,
  ram: 1024 ** 3,
  scratch: 0,
  gpus: 0,
  instanceTypes: null,
  maxRunTimeMs: null,
  ...o,
});
const node = (id: string, job: string | null, o: Partial<NodeInfo> = {}): NodeInfo => ({
  id,
  instanceId: job === null ? null : jobInstance(job),
  lastPingAt: ago(1),
  ...o,
});
const job = (id: string, name: string, o: Partial<SlurmJob> = {}): SlurmJob => ({
  id,
  name,
  state: 'PENDING',
  reason: 'Priority',
  priority: 1000 - Number(id),
  nice: 0,
  nodes: '',
  comment: 'berth:slurm/default',
  ...o,
});
const snap = (o: Partial<SlurmSnapshot>): SlurmSnapshot => ({
  now: NOW,
  held: [],
  queued: [],
  nodes: [],
  jobs: [],
  others: new Map(),
  memory: EMPTY_MEMORY,
  ...o,
});
const plan = (o: Partial<SlurmSnapshot>) => planSlurm(snap(o), cfg);
const ops = (o: Partial<SlurmSnapshot>) =>
  plan(o).actions.map((a) => ({
    ...a,
    ...('container' in a && typeof a.container === 'object' ? { container: a.container.id } : {}),
  }));

describe('planSlurm: submitting', () => {
  it('submits runnable Queued containers in Berth order', () => {
    const p = ops({ queued: [queued('c1', { priority: 900 }), queued('c2')] });
    expect(p).toEqual([
      { op: 'submit', container: 'c1', nice: 0 },
      { op: 'submit', container: 'c2', nice: 0 },
    ]);
  });

  it('within max_jobs (live jobs count, whoever they belong to)', () => {
    const jobs = Array.from({ length: 99 }, (_, i) => job(String(i + 1), `x${i}`));
    const p = plan({
      queued: [queued('c1'), queued('c2')],
      jobs,
      others: new Map(jobs.map((j) => [j.name, null])),
    });
    expect(p.actions.filter((a) => a.op === 'submit')).toHaveLength(1);
    expect(p.status.get('c2')).toBe(
      'waiting to be submitted: this dispatcher has max_jobs (100) jobs in SLURM',
    );
  });

  it('not while sbatch backs off, and says until when', () => {
    const memory = nextBackoff(EMPTY_MEMORY, NOW.getTime(), 'Unable to contact slurm controller');
    const p = plan({ queued: [queued('c1')], memory });
    expect(p.actions).toEqual([]);
    expect(p.status.get('c1')).toBe(
      'waiting to be submitted: sbatch failed (Unable to contact slurm controller); next try at 2026-01-01T00:10:02.000Z',
    );
    expect(
      plan({ queued: [queued('c1')], memory: { ...memory, backoffUntil: NOW.getTime() } }).actions,
    ).toHaveLength(1);
  });

  it('a container whose instance type has no feature is cancelled (perm) without a lock', () => {
    expect(ops({ queued: [queued('c1', { instanceTypes: ['gpu'] })] })).toEqual([
      {
        op: 'cancel',
        container: 'c1',
        class: 'perm',
        reason: 'instance_types: gpu has no SLURM node feature in this cluster\'s "features" (known: big)',
      },
    ]);
  });

  it('never beside a live job of an earlier attempt: that job is cancelled first', () => {
    const p = plan({ queued: [queued('c1')], jobs: [job('7', 'c1', { state: 'RUNNING' })] });
    expect(p.actions.filter((a) => a.op === 'submit')).toEqual([]);
    expect(p.status.get('c1')).toBe('waiting for a SLURM job of an earlier attempt to end');
  });

  it('new work of higher priority: pending jobs of lower priority are reniced below it, new ones get --nice', () => {
    const p = ops({
      held: [held('c1', { priority: 100 })],
      nodes: [node('n-c1', '1')],
      jobs: [job('1', 'c1', { priority: 1000, nice: 0 })],
      queued: [queued('c2', { priority: 900 }), queued('c3', { priority: 100 })],
    });
    // c2 (guessed 999) on top; c1 (1000) must go below 999: need 2, band 12; c3 (guess 998) is below already.
    expect(p).toEqual([
      { op: 'renice', nice: 12, jobs: ['1'] },
      { op: 'submit', container: 'c2', nice: 0 },
      { op: 'submit', container: 'c3', nice: 0 },
    ]);
  });

  it('a priority change: the job moves up (nice lowered) or down', () => {
    const base = {
      held: [held('a', { priority: 900 }), held('b', { priority: 100 })],
      nodes: [node('n-a', '1'), node('n-b', '2')],
    };
    // b was low (nice 50) and is now higher than a: b to 0, a below it.
    const p = ops({
      ...base,
      held: [held('a', { priority: 100 }), held('b', { priority: 900 })],
      jobs: [job('1', 'a', { priority: 999, nice: 0 }), job('2', 'b', { priority: 948, nice: 50 })],
    });
    expect(p).toEqual([
      { op: 'renice', nice: 0, jobs: ['2'] },
      { op: 'renice', nice: 12, jobs: ['1'] },
    ]);
  });
});

describe('planSlurm: jobs and their containers', () => {
  it('Locked, pending: SLURM’s reason as its status', () => {
    const p = plan({
      held: [held('c1')],
      nodes: [node('n-c1', '4')],
      jobs: [job('4', 'c1', { reason: 'Resources' })],
    });
    expect(p.actions).toEqual([]);
    expect(p.status.get('c1')).toMatch(/^SLURM job 4 is pending: it is next; .*\(SLURM reason: Resources\)$/);
  });

  it('Locked, running: its agent is starting it', () => {
    const p = plan({
      held: [held('c1')],
      nodes: [node('n-c1', '4')],
      jobs: [job('4', 'c1', { state: 'RUNNING', nodes: 'big' })],
    });
    expect(p.status.get('c1')).toBe('SLURM job 4 started on big; its agent is starting the container');
  });

  it('Locked, job ended before the agent started it: unlocked with how it ended, node retired', () => {
    expect(
      ops({
        held: [held('c1')],
        nodes: [node('n-c1', '4')],
        jobs: [job('4', 'c1', { state: 'FAILED', reason: 'NonZeroExitCode' })],
      }),
    ).toEqual([
      {
        op: 'unlock',
        container: 'c1',
        reason: 'SLURM job 4 ended: FAILED (NonZeroExitCode) before its agent started the container',
      },
      { op: 'retire', node: 'n-c1', reason: 'its SLURM job ended' },
    ]);
  });

  it('priority 0 (withdrawn), Locked: unlocked, its job cancelled, its node retired', () => {
    expect(
      ops({
        held: [held('c1', { priority: 0 })],
        nodes: [node('n-c1', '4')],
        jobs: [job('4', 'c1')],
      }),
    ).toEqual([
      { op: 'unlock', container: 'c1', reason: 'priority is 0 (withdrawn)' },
      { op: 'scancel', job: '4', reason: 'priority is 0 (withdrawn)' },
      { op: 'retire', node: 'n-c1', reason: 'its container was withdrawn (priority 0)' },
    ]);
  });

  it('priority 0 (withdrawn), Running: cancelled (user) like on the cloud backend; its agent stops it', () => {
    expect(
      ops({
        held: [held('c1', { state: 'Running', priority: 0 })],
        nodes: [node('n-c1', '4')],
        jobs: [job('4', 'c1', { state: 'RUNNING' })],
      }),
    ).toEqual([{ op: 'cancel', container: 'c1', class: 'user', reason: 'priority is 0 (withdrawn)' }]);
  });

  it('Running, job gone: cancelled (temp) so it is retried', () => {
    expect(ops({ held: [held('c1', { state: 'Running' })], nodes: [node('n-c1', '4')] })).toEqual([
      {
        op: 'cancel',
        container: 'c1',
        class: 'temp',
        reason: 'SLURM job 4 is gone from squeue while the container was running',
      },
      { op: 'retire', node: 'n-c1', reason: 'its SLURM job ended' },
    ]);
  });

  it('Running, job failed with its node: the reason says so', () => {
    const p = ops({
      held: [held('c1', { state: 'Running' })],
      nodes: [node('n-c1', '4')],
      jobs: [job('4', 'c1', { state: 'NODE_FAIL', reason: 'NodeDown' })],
    });
    expect(p[0]).toMatchObject({
      op: 'cancel',
      class: 'temp',
      reason: 'SLURM job 4 ended: NODE_FAIL (NodeDown) while the container was running',
    });
  });

  it('Running, job still running, agent silent past node_lost_after: cancelled (temp), job cancelled', () => {
    expect(
      ops({
        held: [held('c1', { state: 'Running' })],
        nodes: [node('n-c1', '4', { lastPingAt: ago(61) })],
        jobs: [job('4', 'c1', { state: 'RUNNING' })],
      }),
    ).toEqual([
      {
        op: 'cancel',
        container: 'c1',
        class: 'temp',
        reason: 'its agent in SLURM job 4 sent no ping for 61s (node_lost_after 60s)',
      },
      { op: 'scancel', job: '4', reason: 'its agent went silent' },
      { op: 'retire', node: 'n-c1', reason: 'its agent went silent' },
    ]);
    expect(
      ops({
        held: [held('c1', { state: 'Running' })],
        nodes: [node('n-c1', '4', { lastPingAt: ago(59) })],
        jobs: [job('4', 'c1', { state: 'RUNNING' })],
      }),
    ).toEqual([]);
  });

  it('held for BadConstraints: released once, then cancelled (perm) with SLURM’s reason', () => {
    const s = {
      held: [held('c1')],
      nodes: [node('n-c1', '4')],
      jobs: [job('4', 'c1', { priority: 0, reason: 'BadConstraints' })],
    };
    const first = plan(s);
    expect(first.actions).toEqual([{ op: 'release', job: '4' }]);
    const second = ops({ ...s, memory: first.memory });
    expect(second).toEqual([
      {
        op: 'cancel',
        container: 'c1',
        class: 'perm',
        reason:
          'SLURM job 4 is held: no node of the partition can ever satisfy its request (CPUs, memory, tmp, GPUs or features) (SLURM reason: BadConstraints)',
      },
      { op: 'scancel', job: '4', reason: 'held for bad constraints' },
      { op: 'retire', node: 'n-c1', reason: 'its SLURM job was cancelled' },
    ]);
  });

  it('held otherwise (by an administrator): left alone, said so, not reniced', () => {
    const p = plan({
      held: [held('c1', { priority: 100 }), held('c2', { priority: 900 })],
      nodes: [node('n-c1', '4'), node('n-c2', '5')],
      jobs: [job('4', 'c1', { priority: 0, reason: 'JobHeldAdmin' }), job('5', 'c2')],
    });
    expect(p.actions).toEqual([]);
    expect(p.status.get('c1')).toMatch(/held by a SLURM administrator/);
  });
});

describe('planSlurm: restarts', () => {
  it('Locked without a node: nothing was submitted, unlocked at once', () => {
    expect(ops({ held: [held('c1', { nodeId: null })] })).toEqual([
      { op: 'unlock', container: 'c1', reason: 'not submitted to SLURM (the dispatcher restarted)' },
    ]);
  });

  it('Locked with an unbound node and a job of its name: adopted (bound), not submitted again', () => {
    expect(ops({ held: [held('c1')], nodes: [node('n-c1', null)], jobs: [job('9', 'c1')] })).toEqual([
      { op: 'bind', container: 'c1', node: 'n-c1', job: '9' },
    ]);
  });

  it('Running with an unbound node: bound too', () => {
    expect(
      ops({
        held: [held('c1', { state: 'Running' })],
        nodes: [node('n-c1', null)],
        jobs: [job('9', 'c1', { state: 'RUNNING' })],
      }),
    ).toEqual([{ op: 'bind', container: 'c1', node: 'n-c1', job: '9' }]);
  });

  it('Locked with an unbound node and no job: waits submit_grace (an sbatch may still land), then unlocks', () => {
    const s = { held: [held('c1', { updatedAt: ago(29) })], nodes: [node('n-c1', null)] };
    expect(plan(s).actions).toEqual([]);
    expect(plan(s).status.get('c1')).toBe('being submitted to SLURM');
    expect(ops({ ...s, held: [held('c1', { updatedAt: ago(30) })] })).toEqual([
      {
        op: 'unlock',
        container: 'c1',
        reason: 'no SLURM job named c1 after 30s (its submission was cut short)',
      },
      { op: 'retire', node: 'n-c1', reason: 'its container was given back' },
    ]);
  });

  it('two live jobs of one name: the bound one counts, the other is cancelled', () => {
    const p = ops({
      held: [held('c1')],
      nodes: [node('n-c1', '12')],
      jobs: [job('11', 'c1'), job('12', 'c1')],
      others: new Map(),
    });
    expect(p).toEqual([{ op: 'scancel', job: '11', reason: "another job is its container's current one" }]);
  });

  it('nodes with neither a held container nor a live job are retired; ones whose job still runs are kept', () => {
    expect(
      ops({
        nodes: [node('n1', '1'), node('n2', null), node('n3', '3')],
        jobs: [job('1', 'cx', { state: 'COMPLETED' }), job('3', 'cy', { state: 'RUNNING' })],
        others: new Map([['cy', 'Complete']]),
        memory: { ...EMPTY_MEMORY, orphanSince: new Map([['3', NOW.getTime() - 1000]]) },
      }),
    ).toEqual([
      { op: 'retire', node: 'n1', reason: 'its SLURM job ended' },
      { op: 'retire', node: 'n2', reason: 'not bound to a SLURM job' },
    ]);
  });
});

describe('planSlurm: jobs nobody holds', () => {
  it('pending job of a cancelled container: scancel at once', () => {
    expect(ops({ jobs: [job('4', 'c1')], others: new Map([['c1', 'Cancelled']]) })).toEqual([
      { op: 'scancel', job: '4', reason: 'its container is Cancelled' },
    ]);
  });

  it('running job of an ended container: its agent stops it; scancel only after orphan_grace', () => {
    const s = { jobs: [job('4', 'c1', { state: 'RUNNING' })], others: new Map([['c1', 'Cancelled']]) };
    const first = plan(s);
    expect(first.actions).toEqual([]);
    expect(first.memory.orphanSince.get('4')).toBe(NOW.getTime());
    const later = planSlurm(snap({ ...s, now: new Date(NOW.getTime() + 60_000), memory: first.memory }), cfg);
    expect(later.actions).toEqual([
      { op: 'scancel', job: '4', reason: 'its container is Cancelled and the job still runs after 60s' },
    ]);
  });

  it('a job whose name is not a container of this database is left alone', () => {
    expect(ops({ jobs: [job('4', 'c-other')], others: new Map([['c-other', null]]) })).toEqual([]);
  });
});

describe('planSlurm: a container moved into another job’s allocation', () => {
  // c2 ran first in SLURM job 1 (named c1, whose container is Complete); c2's own job 2 has not started.
  const moved = held('c2', { state: 'Running', nodeId: 'n-c1' });
  const nodes = [node('n-c1', '1'), node('n-c2', '2')];
  const running = job('1', 'c1', { state: 'RUNNING', reason: 'None', nodes: 'node1' });
  const others = new Map([['c1', 'Complete']]);

  it('keeps it running by the job of its node, and scancels its own pending job as superseded', () => {
    expect(ops({ held: [moved], nodes, jobs: [running, job('2', 'c2')], others })).toEqual([
      { op: 'scancel', job: '2', reason: 'superseded: its container runs in the allocation of SLURM job 1' },
    ]);
  });

  it('its own job starting anyway: scancelled after orphan_grace (its agent finds nothing and exits)', () => {
    const own = job('2', 'c2', { state: 'RUNNING', reason: 'None', nodes: 'node2' });
    const first = plan({ held: [moved], nodes, jobs: [running, own], others });
    expect(first.actions).toEqual([]);
    const later = planSlurm(
      snap({
        held: [moved],
        nodes: nodes.map((n) => ({ ...n, lastPingAt: NOW })),
        jobs: [running, own],
        others,
        memory: first.memory,
        now: new Date(NOW.getTime() + 60_000),
      }),
      cfg,
    );
    expect(later.actions).toEqual([
      {
        op: 'scancel',
        job: '2',
        reason:
          'superseded: its container runs in the allocation of SLURM job 1 and the job still runs after 60s',
      },
    ]);
  });

  it('its own job vanishing does not cancel it; its node’s job ending does (temp), and retires that node', () => {
    expect(ops({ held: [moved], nodes, jobs: [running], others })).toEqual([
      { op: 'retire', node: 'n-c2', reason: 'its SLURM job ended' },
    ]);
    const ended = job('1', 'c1', { state: 'TIMEOUT', reason: 'None' });
    expect(ops({ held: [moved], nodes, jobs: [ended, job('2', 'c2')], others })).toEqual([
      {
        op: 'cancel',
        container: 'c2',
        class: 'temp',
        reason: 'SLURM job 1 ended: TIMEOUT while the container was running',
      },
      { op: 'retire', node: 'n-c1', reason: 'its SLURM job ended' },
      { op: 'scancel', job: '2', reason: 'superseded: its container runs in the allocation of SLURM job 1' },
    ]);
  });

  it('priority 0 while it runs there: cancelled (user), its agent stops it; its own job superseded', () => {
    expect(
      ops({ held: [{ ...moved, priority: 0 }], nodes, jobs: [running, job('2', 'c2')], others }),
    ).toEqual([
      { op: 'cancel', container: 'c2', class: 'user', reason: 'priority is 0 (withdrawn)' },
      { op: 'scancel', job: '2', reason: 'superseded: its container runs in the allocation of SLURM job 1' },
    ]);
  });

  it('a silent agent in the reused allocation: cancelled (temp), that job scancelled', () => {
    const silent = [node('n-c1', '1', { lastPingAt: ago(120) }), node('n-c2', '2')];
    expect(ops({ held: [moved], nodes: silent, jobs: [running], others })).toEqual([
      {
        op: 'cancel',
        container: 'c2',
        class: 'temp',
        reason: 'its agent in SLURM job 1 sent no ping for 120s (node_lost_after 60s)',
      },
      { op: 'scancel', job: '1', reason: 'its agent went silent' },
      { op: 'retire', node: 'n-c1', reason: 'its agent went silent' },
      { op: 'retire', node: 'n-c2', reason: 'its SLURM job ended' },
    ]);
  });
});
