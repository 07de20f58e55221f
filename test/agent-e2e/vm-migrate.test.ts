// A reclaim migrates a `vm` container by its whole state (issue 16; runner.ts checkpointWay, the vm
// runtime's wholeState): two agents on the vm runtime (real QEMU guests, software emulation), an
// opportunistic counter on instance A (paused by its owner once it counted a little, so that it stops
// well before its end on any host's speed), and a neighbour in A's instance group that grows into the
// memory the counter borrowed. A's pressure watcher freezes the guest; the runtime saves it whole; the agent sends
// the saved state to the API as the container's checkpoint and hands it back as a migration. The retry,
// placed on instance B, downloads it and resumes the guest where it stood: the counter goes on, it does not
// start again, and A's output and B's together are 1..N exactly once.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { cgroupAt, cgroupsUnusable, probeCgroups, type Cgroup } from '../../src/agent/runtimes/cgroup.js';
import { processesMentioning } from '../helpers/cli.js';
import { findGuest } from '../helpers/guest.js';
import { itIf } from '../helpers/needs.js';
import { alice, Harness, until } from './harness.js';

const MiB = 1024 * 1024;
const guest = findGuest('test');
const missing =
  typeof guest === 'string'
    ? guest
    : process.getuid?.() !== 0
      ? 'not root: the QEMU process joins a cgroup'
      : await cgroupsUnusable();
/** The saved guest (about 90 MiB for a 224 MiB guest) must fit the API's and the agents' limits. */
const LIMIT = 256 * MiB;
let h: Harness;
const groups: Cgroup[] = [];
let neighbour: ChildProcess | null = null;

beforeAll(async () => {
  h = await Harness.create({ checkpointLimitBytes: LIMIT });
});
afterAll(async () => {
  neighbour?.kill('SIGKILL');
  await h?.cleanup();
  for (const g of groups.reverse()) await g.remove().catch(() => {});
});

/** An instance's group (the containers' parent), roomy: pressure is the watcher's instance_ram here. */
async function instanceGroup(name: string): Promise<Cgroup> {
  const g = cgroupAt(await probeCgroups(), name);
  await g.create({ vcpus: 2, ram: 4096 * MiB });
  groups.push(g);
  return g;
}

/**
 * The guaranteed neighbour growing to its request: a process in a group below `parent` that allocates
 * 1 GiB (touched) in 16 MiB steps, then holds it until killed.
 */
async function grow(parent: string, name = 'neighbour'): Promise<void> {
  const g = await instanceGroup(`${parent}/${name}`);
  const js = `const held = []; const step = () => { if (held.length < 64) { held.push(Buffer.alloc(16 * 1048576, 1)); setTimeout(step, 20); } }; step(); setInterval(() => {}, 1000);`;
  neighbour = spawn(
    '/bin/sh',
    [
      '-c',
      'for f in $1; do echo $$ >"$f" || exit 125; done; shift; exec "$@"',
      'grow',
      g.procsFiles().join(' '),
      process.execPath,
      '-e',
      js,
    ],
    { stdio: 'ignore' },
  );
}

describe('a reclaim migrates a vm container by its whole state', () => {
  itIf(missing)(
    'an opportunistic counter in a guest is frozen on A, saved whole, resumed on B: its output is 1..N once, never restarted',
    async () => {
      const [pa, pb] = [0, 1].map(() => `berth-vmmig-${randomBytes(4).toString('hex')}`) as [string, string];
      await instanceGroup(pa);
      await instanceGroup(pb);
      const vm = { runtime: 'vm' as const, vmGuest: typeof guest === 'string' ? null : guest.dir };
      // A: pressure once its containers use more than 1 GiB - 64 MiB (the guest's QEMU is capped at 608 MiB,
      // so only the neighbour's growth crosses it). B: never under pressure.
      const a = await h.node();
      const b = await h.node();
      const { lines } = h.startAgent(a, {
        ...vm,
        cgroupParent: pa,
        pressure: {
          intervalMs: 50,
          headroomBytes: 64 * MiB,
          psiPercent: null,
          cpuPercent: null,
          instanceRam: 1024 * MiB,
        },
        checkpointLimitBytes: LIMIT,
      });
      h.startAgent(b, {
        ...vm,
        cgroupParent: pb,
        pressure: { psiPercent: null, cpuPercent: null, instanceRam: null },
        checkpointLimitBytes: LIMIT,
      });
      const N = 40;
      const opp = await h.submitCounter(a, N);
      // The first start on A boots a guest (its template): minutes on a slow host.
      await until(
        async () => (await h.text(opp, 'stdout')).split('\n').length > 3,
        240_000,
        'the counter on instance A',
      );
      // Its owner pauses it (the guest is frozen, as a reclaim freezes it): it stops at a count well under
      // N whatever this host's speed, and the reclaim below saves it frozen.
      await h.store.pauses.request(opp, true, alice);
      await until(async () => (await h.store.containers.get(opp)).paused, 60_000, 'the counter paused');
      await grow(pa);
      const ended = await h.waitState(opp, ['Cancelled'], 120_000);
      neighbour?.kill('SIGKILL');
      expect(ended.failure_class).toBe('temp');
      const system = await h.text(opp, 'system');
      expect(system).toMatch(/reclaimed: frozen \(memory pressure/);
      const saved = /whole state saved by the vm runtime: (\d+) bytes in (\d+) ms/.exec(system);
      expect(saved, system).not.toBeNull();
      const sent =
        /checkpoint kept: 3 file\(s\), \d+ bytes \(a (\d+)-byte archive, packed and sent in (\d+) ms\)/.exec(
          system,
        );
      expect(sent, system).not.toBeNull();
      expect(lines.some((l) => l.includes(`memory pressure`) && l.includes(`reclaimed ${opp}`))).toBe(true);
      const before = await h.text(opp, 'stdout');
      const last = Number(before.trim().split('\n').pop());
      expect(last).toBeLessThan(N);
      const events = await h.store.containerList.events(opp);
      const kinds = events.map((e) => e.kind);
      expect(kinds).toEqual(expect.arrayContaining(['migrate', 'reclaim']));
      expect(kinds.indexOf('migrate')).toBeLessThan(kinds.indexOf('reclaim'));
      // Requeued as a migration, spending no retry (max_temp_retries 0 would have ended it otherwise).
      const req = await h.store.requests.get(ended.request_id);
      expect(req).toMatchObject({ state: 'Committed', temp_failures: 0 });

      const retry = req.container_id!;
      await h.assign(retry, b);
      const done = await h.waitState(retry, ['Complete'], 240_000).catch(async (err: Error) => {
        const c = await h.store.containers.get(retry);
        throw new Error(
          `${err.message}: it is ${c.state}; its log: ${await h.text(retry, 'system')} ${(await h.text(retry, 'stdout')).slice(-200)}`,
        );
      });
      expect(done).toMatchObject({ exit_code: 0, oom_killed: false, node_id: b.id });
      const after = await h.text(retry, 'stdout');
      // Not restarted, nothing lost or repeated.
      expect(before + after).toBe(Array.from({ length: N }, (_, k) => `${k + 1}\n`).join(''));
      expect(after.startsWith('1\n')).toBe(false);
      const resumed =
        /checkpoint restored from an earlier attempt \((\d+) bytes, downloaded and unpacked in (\d+) ms\); resumed from its whole state where it stood in (\d+) ms/.exec(
          await h.text(retry, 'system'),
        );
      expect(resumed, await h.text(retry, 'system')).not.toBeNull();
      expect(await h.migrations(retry)).toEqual([
        expect.stringContaining(`from instance ${a.instanceId} to ${b.instanceId}`),
      ]);
      expect(await h.store.requests.get(ended.request_id)).toMatchObject({
        state: 'Final',
        outcome: 'success',
      });
      // A failed save falls back to the next way out: killed and requeued without a checkpoint (no retry
      // spent), the reclaim event says why.
      const opp2 = await h.submit({
        command: ['/bin/sh', '-c', 'i=0; while :; do i=$((i+1)); echo $i; sleep 0.2; done'],
        ram: '64MiB',
        max_temp_retries: 0,
        opportunistic: true,
      });
      await h.assign(opp2, a);
      await until(async () => (await h.text(opp2, 'stdout')).length > 0, 240_000, 'the second counter on A');
      // Where its save would go is taken by a file: the save fails.
      await writeFile(join(a.workDir, 'containers', opp2, 'whole-state'), '');
      await grow(pa, 'neighbour2');
      const ended2 = await h.waitState(opp2, ['Cancelled'], 120_000);
      neighbour?.kill('SIGKILL');
      const events2 = await h.store.containerList.events(opp2);
      expect(events2.some((e) => e.kind === 'migrate')).toBe(false);
      expect(events2.find((e) => e.kind === 'reclaim')?.message).toMatch(
        /^reclaimed: memory pressure: .* \(whole-state save failed: .*whole-state.*\)$/,
      );
      const req2 = await h.store.requests.get(ended2.request_id);
      expect(req2).toMatchObject({ state: 'Committed', temp_failures: 0 });
      expect(await h.store.containers.get(req2.container_id!)).toMatchObject({ state: 'Queued' });

      // Nothing left running: the guest on A ended with its save, the one on B with its command.
      await until(
        async () => [a, b].every((n) => processesMentioning(n.workDir).length === 0),
        30_000,
        'no QEMU left on A or B',
      );
      console.log(
        `vm migration (tcg, 224 MiB guest): save ${saved![2]} ms (${(Number(saved![1]) / MiB).toFixed(1)} MiB state), ` +
          `pack + upload ${sent![2]} ms (${(Number(sent![1]) / MiB).toFixed(1)} MiB archive), ` +
          `download + unpack ${resumed![2]} ms, resume ${resumed![3]} ms; counter stopped after ${last} of ${N}`,
      );
    },
    600_000,
  );
});
