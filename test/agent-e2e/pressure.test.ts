// The agent's way out (issue 16 item 2) on a real cgroup: the containers' parent group is an instance
// with a memory limit; an opportunistic container (submitted with `opportunistic: true`) holds memory its
// guaranteed neighbour has reserved but not used yet; the guaranteed one grows to its request. The pressure
// watcher freezes the opportunistic one, hands it back (reclaimed: retried at once, spending no retry), and
// the guaranteed one finishes without an OOM kill. The retry then runs and finishes, once; a counter that
// checkpoints continues from its checkpoint on another instance (carried by the API).
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { randomBytes } from 'node:crypto';
import { cgroupAt, cgroupsUnusable, probeCgroups, type Cgroup } from '../../src/agent/runtimes/cgroup.js';
import { itIf } from '../helpers/needs.js';
import { Harness, until } from './harness.js';

const MiB = 1024 * 1024;
const cgroupsMissing = await cgroupsUnusable();
let h: Harness;
let instance: Cgroup | null = null;
const parent = `berth-pressure-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  h = await Harness.create();
});
afterAll(async () => {
  await h?.cleanup();
  await instance?.remove().catch(() => {});
});

/** The watcher of every agent here: quick samples, 64 MiB of headroom, no PSI, the instance group's limit. */
const pressure = { intervalMs: 20, headroomBytes: 64 * MiB, psiPercent: null, instanceRam: null };

/** The instance: 384 MiB for all containers together (the agents' cgroup parent). */
async function instanceGroup(): Promise<void> {
  if (instance) return;
  instance = cgroupAt(await probeCgroups(), parent);
  await instance.create({ vcpus: 2, ram: 384 * MiB });
}

/** Allocates `mib` MiB (touched) in 4 MiB steps, `stepMs` apart, says so, then holds it `holdMs`. */
const allocator = (mib: number, stepMs: number, holdMs: number) =>
  `const held = []; let n = 0;
   const step = () => {
     if (n >= ${mib}) { console.log('holding ' + n); setTimeout(() => { console.log('done ' + held.length); }, ${holdMs}); return; }
     held.push(Buffer.alloc(4 * 1048576, 1)); n += 4; setTimeout(step, ${stepMs});
   };
   step();`;

/** A counter holding 120 MiB: on SIGUSR1 it writes its count and exits; restored, it counts 50 more. */
const counter = `const fs = require('fs'); const f = process.env.BERTH_CHECKPOINT_DIR + '/count';
  let n = fs.existsSync(f) ? Number(fs.readFileSync(f, 'utf8')) : 0; const first = n;
  const held = []; for (let i = 0; i < 30; i++) held.push(Buffer.alloc(4 * 1048576, 1));
  console.log('start ' + n);
  process.on('SIGUSR1', () => { fs.writeFileSync(f, String(n)); console.log('checkpoint ' + n); process.exit(0); });
  setInterval(() => { n++; if (first > 0 && n >= first + 50) { console.log('finished ' + n); process.exit(0); } }, 5);`;

describe('pressure watcher (real cgroup, process runtime)', () => {
  itIf(cgroupsMissing)(
    'a guaranteed container grows into borrowed memory: the opportunistic one is frozen and requeued, the guaranteed one is never OOM-killed',
    async () => {
      await instanceGroup();
      const node = await h.node();
      const { lines } = h.startAgent(node, {
        cgroupParent: parent,
        pressure,
        // No checkpoint asked for: killed as soon as it is frozen.
        checkpointWaitMs: 0,
      });
      const opp = await h.submit({
        command: ['node', '-e', allocator(120, 5, 600_000)],
        ram: '256MiB',
        max_temp_retries: 0,
        opportunistic: true,
      });
      await h.assign(opp, node);
      await until(async () => (await h.text(opp, 'stdout')).includes('holding'), 30_000, 'opp holding');
      // The guaranteed container reserved 256 MiB and grows to ~230 (with node's own ~40): into the borrowed part.
      const g = await h.submitAndAssign(node, {
        command: ['node', '-e', allocator(192, 80, 200)],
        ram: '256MiB',
      });
      const done = await h.waitState(g, ['Complete'], 60_000);
      expect(done).toMatchObject({ exit_code: 0, oom_killed: false });
      expect(await h.text(g, 'stdout')).toContain('done 48');
      const ended = await h.waitState(opp, ['Cancelled'], 10_000);
      expect(ended.failure_class).toBe('temp');

      const events = (await h.store.containerList.events(opp)).map((e) => `${e.kind}: ${e.message}`);
      expect(events).toContainEqual(expect.stringMatching(/^reclaim: reclaimed: memory pressure: /));
      expect(lines.some((l) => /memory pressure: .* reclaimed/.test(l))).toBe(true);
      expect(await h.text(opp, 'system')).toMatch(/reclaimed: frozen \(memory pressure/);
      // Requeued at once, spending no retry (max_temp_retries 0 would have ended it otherwise).
      const req = await h.store.requests.get(ended.request_id);
      expect(req).toMatchObject({ state: 'Committed', temp_failures: 0, attempts: 0 });
      const retry = req.container_id!;
      expect(retry).not.toBe(opp);
      expect(await h.store.containers.get(retry)).toMatchObject({ state: 'Queued', run_after: null });
    },
    120_000,
  );

  itIf(cgroupsMissing)(
    'two opportunistic containers, the guaranteed one grows by less than one of them: exactly one is reclaimed, the other thaws and finishes here',
    async () => {
      await instanceGroup();
      const node = await h.node();
      const { lines } = h.startAgent(node, {
        cgroupParent: parent,
        pressure: { ...pressure, marginBytes: 16 * MiB },
        checkpointWaitMs: 0,
      });
      // Each holds 120 MiB (~128 in the group with node's own) for 20 s, then ends by itself.
      const opps: string[] = [];
      for (let i = 0; i < 2; i++) {
        const id = await h.submit({
          command: ['node', '-e', allocator(120, 5, 20_000)],
          ram: '192MiB',
          max_temp_retries: 0,
          opportunistic: true,
        });
        await h.assign(id, node);
        opps.push(id);
      }
      for (const id of opps)
        await until(async () => (await h.text(id, 'stdout')).includes('holding'), 30_000, `${id} holding`);
      // The guaranteed container grows by 112 MiB: into the borrowed part (free memory falls under the
      // headroom), by less than one of them.
      const g = await h.submitAndAssign(node, {
        command: ['node', '-e', allocator(112, 80, 200)],
        ram: '192MiB',
      });
      expect(await h.waitState(g, ['Complete'], 60_000)).toMatchObject({ exit_code: 0, oom_killed: false });
      const ends = await Promise.all(opps.map((id) => h.waitState(id, ['Complete', 'Cancelled'], 60_000)));
      const reclaimed = ends.filter((c) => c.state === 'Cancelled');
      const finished = ends.filter((c) => c.state === 'Complete');
      expect(reclaimed).toHaveLength(1);
      expect(finished).toHaveLength(1);
      expect(finished[0]).toMatchObject({ exit_code: 0, node_id: node.id });
      expect(await h.text(finished[0]!.id, 'stdout')).toContain('done 30');
      const events = (await h.store.containerList.events(reclaimed[0]!.id)).map((e) => e.kind);
      expect(events).toContain('reclaim');
      expect(
        lines.some((l) => new RegExp(`reclaimed ${reclaimed[0]!.id}; thawed ${finished[0]!.id}`).test(l)),
      ).toBe(true);
    },
    120_000,
  );

  itIf(cgroupsMissing)(
    'a reclaimed counter checkpoints on instance A and continues from its checkpoint on instance B (through the API)',
    async () => {
      await instanceGroup();
      const a = await h.node();
      const b = await h.node();
      h.startAgent(a, { cgroupParent: parent, pressure, checkpointWaitMs: 10_000 });
      // Instance B: another agent with its own work dir; nothing is shared with A but the API.
      h.startAgent(b, { cgroupParent: parent, pressure, checkpointWaitMs: 10_000 });
      const opp = await h.submit({
        command: ['node', '-e', counter],
        ram: '256MiB',
        max_temp_retries: 0,
        opportunistic: true,
      });
      await h.assign(opp, a);
      await until(async () => (await h.text(opp, 'stdout')).includes('start 0'), 30_000, 'the counter');
      const g = await h.submitAndAssign(a, {
        command: ['node', '-e', allocator(192, 80, 200)],
        ram: '256MiB',
      });
      expect(await h.waitState(g, ['Complete'], 60_000)).toMatchObject({ exit_code: 0, oom_killed: false });
      const ended = await h.waitState(opp, ['Cancelled'], 30_000);
      const saved = /checkpoint (\d+)/.exec(await h.text(opp, 'stdout'));
      expect(saved, 'the first attempt wrote its checkpoint').not.toBeNull();
      const count = Number(saved![1]);
      expect(count).toBeGreaterThan(0);
      expect(await h.text(opp, 'system')).toMatch(/checkpoint kept: 1 file\(s\)/);
      const kinds = (await h.store.containerList.events(opp)).map((e) => e.kind);
      expect(kinds).toEqual(expect.arrayContaining(['migrate', 'reclaim']));

      // Instance A is left out (as a held or draining instance is): the retry runs on B.
      const retry = (await h.store.requests.get(ended.request_id)).container_id!;
      await h.assign(retry, b);
      expect(await h.waitState(retry, ['Complete'], 60_000)).toMatchObject({ exit_code: 0 });
      const out = await h.text(retry, 'stdout');
      expect(out).toContain(`start ${count}\n`);
      expect(out).toContain(`finished ${count + 50}\n`);
      expect(await h.text(retry, 'system')).toMatch(
        /checkpoint restored from an earlier attempt \(\d+ bytes, downloaded and unpacked in \d+ ms\)/,
      );
      expect(await h.migrations(retry)).toEqual([
        expect.stringContaining(`from instance ${a.instanceId} to ${b.instanceId}`),
      ]);
      expect(await h.store.requests.get(ended.request_id)).toMatchObject({
        state: 'Final',
        outcome: 'success',
      });
      // The request's end drops the kept checkpoint.
      expect((await h.store.checkpoints.infoOf([ended.request_id])).size).toBe(0);
    },
    120_000,
  );

  itIf(cgroupsMissing)(
    'a checkpoint over checkpoint_limit is not kept: the reclaim event says so, and the retry has none',
    async () => {
      await instanceGroup();
      const node = await h.node();
      h.startAgent(node, {
        cgroupParent: parent,
        pressure,
        checkpointWaitMs: 10_000,
        checkpointLimitBytes: 1,
      });
      const opp = await h.submit({ command: ['node', '-e', counter], ram: '256MiB', opportunistic: true });
      await h.assign(opp, node);
      await until(async () => (await h.text(opp, 'stdout')).includes('start 0'), 30_000, 'the counter');
      const g = await h.submitAndAssign(node, {
        command: ['node', '-e', allocator(192, 80, 200)],
        ram: '256MiB',
      });
      expect(await h.waitState(g, ['Complete'], 60_000)).toMatchObject({ exit_code: 0, oom_killed: false });
      const ended = await h.waitState(opp, ['Cancelled'], 30_000);
      expect(await h.text(opp, 'stdout')).toMatch(/checkpoint \d+/);
      const events = await h.store.containerList.events(opp);
      expect(events.find((e) => e.kind === 'reclaim')?.message).toMatch(
        /^reclaimed: memory pressure: .*\(checkpoint of \d+ bytes not kept: over the checkpoint limit of 1 bytes\)$/,
      );
      expect(events.some((e) => e.kind === 'migrate')).toBe(false);
      expect((await h.store.checkpoints.infoOf([ended.request_id])).size).toBe(0);
    },
    120_000,
  );
});
