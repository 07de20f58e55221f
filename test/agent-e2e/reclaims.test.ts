// Whether an agent can claim lent room back (issue 16): an agent whose pressure watcher runs says so in its
// pings (`reclaims`), and the API keeps it on its node, so that only its instance lends room to
// opportunistic containers (src/dispatch/scheduler/opportunistic.ts). An agent whose cgroups cannot be read
// runs no watcher, though it still reports usage: its node says it cannot. An agent told to save
// unsandboxed containers whole with CRIU (process_criu) says once whether it can (on this host's kernel
// 6.18 `criu check` fails: it says why, and runs containers as before); so does one told to save runc
// containers whole (runc_criu), which also never resumes a checkpoint another runtime saved whole.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cgroupsUnusable } from '../../src/agent/runtimes/cgroup.js';
import { criuUnusable } from '../../src/agent/runtimes/criu.js';
import { RUNC_CRIU_NETWORK } from '../../src/agent/runtimes/runc.js';
import { TEST_ROOTFS_TAR, rootfsMissing } from '../agent/helpers.js';
import { itIf } from '../helpers/needs.js';
import { Harness, until } from './harness.js';

const cgroupsMissing = await cgroupsUnusable();
let h: Harness;

beforeAll(async () => {
  h = await Harness.create();
});
afterAll(async () => {
  await h?.cleanup();
});

/**
 * The node's stored word once its agent has pinged after `line` appeared in its log: a container assigned
 * then reaches the agent only through a later ping, and its start through one more.
 */
async function reclaimsAfter(
  node: { id: string; instanceId: string },
  lines: string[],
  line: RegExp,
): Promise<boolean> {
  await until(() => lines.some((l) => line.test(l)), 30_000, `agent log line ${line}`);
  const c = await h.submitAndAssign(node, { command: ['true'] });
  await h.waitState(c, ['Complete']);
  return (await h.store.nodes.get(node.id)).reclaims;
}

describe("an agent's reclaims", () => {
  itIf(cgroupsMissing)('an agent whose pressure watcher runs says it reclaims', async () => {
    const node = await h.node();
    const { lines } = h.startAgent(node);
    await until(async () => (await h.store.nodes.get(node.id)).reclaims, 30_000, 'reclaims true');
    expect(lines.some((l) => l.startsWith('pressure watcher: '))).toBe(true);
  });

  it('an agent without usable cgroups runs no watcher and says it cannot reclaim', async () => {
    const node = await h.node();
    const { lines } = h.startAgent(node, {
      pressure: { cgroupRoot: `/nonexistent-berth-cgroup-${randomBytes(4).toString('hex')}` },
    });
    expect(await reclaimsAfter(node, lines, /^no pressure watcher: /)).toBe(false);
  });
});

describe("an agent's CRIU whole state (process_criu)", () => {
  it("says once whether it saves containers whole (here: why not, criu check's error) and runs them", async () => {
    const why = await criuUnusable();
    const node = await h.node();
    const { lines } = h.startAgent(node, { processSandbox: 'none', processCriu: 'criu' });
    const c = await h.submitAndAssign(node, { command: ['sh', '-c', 'echo counted; exit 3'] });
    await h.waitState(c, ['Complete', 'Cancelled']);
    expect(await h.store.containers.get(c)).toMatchObject({ state: 'Complete', exit_code: 3 });
    expect(await h.text(c, 'stdout')).toBe('counted\n');
    const said = lines.filter((l) => /CRIU whole state/.test(l));
    expect(said).toEqual([
      why === null
        ? 'CRIU whole state: reclaimed image-less containers are saved whole (criu)'
        : `no CRIU whole state: ${why}`,
    ]);
  });

  it('never restores as process images a checkpoint the container wrote itself (only one its runtime saved whole)', async () => {
    // Attempt 1 runs where nothing is saved whole: it writes its own checkpoint directory (files named as
    // criu's images would be) and fails, so the API keeps them for attempt 2.
    const a = await h.node();
    h.startAgent(a);
    const c1 = await h.submitAndAssign(a, {
      command: [
        'sh',
        '-c',
        'if [ -n "$BERTH_CHECKPOINT_DIR" ]; then echo forged > "$BERTH_CHECKPOINT_DIR/inventory.img"; exit 1; fi; echo fresh',
      ],
      retry_on_failure: true,
      container_count_max: 2,
    });
    await h.waitState(c1, ['Complete']);
    expect(await h.text(c1, 'system')).toMatch(/checkpoint kept: 1 file/);
    const rid = (await h.store.containers.get(c1)).request_id;
    const c2 = await until(
      async () =>
        (
          await h.store.ctx.pool.query<{ id: string }>(
            `SELECT id FROM containers WHERE request_id = $1 AND id <> $2 AND state = 'Queued'`,
            [rid, c1],
          )
        ).rows[0]?.id ?? null,
      30_000,
      'attempt 2',
    );
    // Attempt 2 lands on an agent that saves unsandboxed containers whole (a stand-in criu whose check
    // passes and which records every other call).
    const dir = await h.tempDir('berth-criu-standin-');
    const criu = join(dir, 'criu');
    await writeFile(criu, `#!/bin/sh\n[ "$1" = check ] && exit 0\necho "$*" >> '${dir}/calls'\nexit 1\n`);
    await chmod(criu, 0o755);
    const b = await h.node();
    const { lines } = h.startAgent(b, {
      processSandbox: 'none',
      processCriu: criu,
    });
    await until(() => lines.some((l) => /CRIU whole state/.test(l)), 30_000, 'the CRIU line');
    expect(lines.filter((l) => /CRIU whole state/.test(l))).toEqual([
      'CRIU whole state: reclaimed image-less containers are saved whole (criu)',
    ]);
    await h.assign(c2, b);
    expect(await h.waitState(c2, ['Complete'])).toMatchObject({ exit_code: 0 });
    expect(await h.text(c2, 'stdout')).toBe('fresh\n');
    expect(await h.text(c2, 'system')).toMatch(
      /whole state not resumed \(starting afresh\): the checkpoint was written by the container itself, not saved whole by the process runtime/,
    );
    // criu was never asked to restore anything.
    expect(await readFile(join(dir, 'calls'), 'utf8').catch(() => '')).toBe('');
  });
});

describe("an agent's runc whole state (runc_criu)", () => {
  const runcMissing = rootfsMissing();

  itIf(runcMissing)(
    'says once whether it saves runc containers whole (here: why not) and runs them as before',
    async () => {
      const why = await criuUnusable();
      const node = await h.node();
      const { lines } = h.startAgent(node, {
        runtime: 'runc',
        containerNetwork: 'host',
        runcCriu: 'criu',
      });
      const c = await h.submitAndAssign(node, {
        image: TEST_ROOTFS_TAR,
        command: ['sh', '-c', 'echo counted; exit 3'],
      });
      await h.waitState(c, ['Complete', 'Cancelled']);
      expect(await h.store.containers.get(c)).toMatchObject({ state: 'Complete', exit_code: 3 });
      expect(await h.text(c, 'stdout')).toBe('counted\n');
      expect(lines.filter((l) => /runc CRIU whole state/.test(l))).toEqual([
        why === null
          ? 'runc CRIU whole state: reclaimed runc containers are saved whole (runc checkpoint)'
          : `no runc CRIU whole state: ${why}`,
      ]);
      // Its own network namespace: said before criu is asked.
      const own = await h.node();
      const ownAgent = h.startAgent(own, { runtime: 'runc', runcCriu: 'criu' });
      await until(() => ownAgent.lines.some((l) => /runc CRIU whole state/.test(l)), 30_000, 'the line');
      expect(ownAgent.lines.filter((l) => /runc CRIU whole state/.test(l))).toEqual([
        `no runc CRIU whole state: ${RUNC_CRIU_NETWORK}`,
      ]);
    },
  );

  itIf(runcMissing)(
    'never resumes with runc restore a checkpoint another runtime saved whole (the record says which)',
    async () => {
      // The agent saves runc containers whole (a stand-in criu whose check passes and which records every
      // other call: runc would call it to restore).
      const dir = await h.tempDir('berth-runc-criu-standin-');
      const criu = join(dir, 'criu');
      await writeFile(criu, `#!/bin/sh\n[ "$1" = check ] && exit 0\necho "$*" >> '${dir}/calls'\nexit 1\n`);
      await chmod(criu, 0o755);
      const node = await h.node();
      const { lines } = h.startAgent(node, { runtime: 'runc', containerNetwork: 'host', runcCriu: criu });
      await until(() => lines.some((l) => /runc CRIU whole state/.test(l)), 30_000, 'the CRIU line');
      expect(lines.filter((l) => /runc CRIU whole state/.test(l))).toEqual([
        'runc CRIU whole state: reclaimed runc containers are saved whole (runc checkpoint)',
      ]);
      // Attempt 1 runs; meanwhile its request gets a checkpoint recorded as saved whole by the process
      // runtime (as a process agent with process_criu would upload it). It fails, so attempt 2 gets it
      // (and fails too: only its start matters).
      const c1 = await h.submit({
        image: TEST_ROOTFS_TAR,
        // Long enough for the checkpoint to be put while it runs (its lock token is only good then).
        command: ['sh', '-c', 'echo started; sleep 6; exit 1'],
        retry_on_failure: true,
        container_count_max: 2,
      });
      const [lock] = await h.store.containers.lock([c1], 'test-dispatcher');
      await h.store.containers.assign(c1, 'test-dispatcher', node.instanceId, node.id);
      await h.waitState(c1, ['Running']);
      const layer = await h.tempDir('berth-runc-forged-');
      await writeFile(join(layer, 'runc.json'), '{}');
      const tar = execFileSync('tar', ['-cf', '-', '-C', layer, '.']);
      await h.store.checkpoints.put({ id: c1, node: node.id, token: lock!.token }, [tar], false, 'process');
      await h.waitState(c1, ['Complete', 'Cancelled']);
      expect(await h.store.containers.get(c1)).toMatchObject({ exit_code: 1 });
      const rid = (await h.store.containers.get(c1)).request_id;
      const c2 = await until(
        async () =>
          (
            await h.store.ctx.pool.query<{ id: string }>(
              `SELECT id FROM containers WHERE request_id = $1 AND id <> $2 AND state = 'Queued'`,
              [rid, c1],
            )
          ).rows[0]?.id ?? null,
        30_000,
        'attempt 2',
      );
      await h.assign(c2, node);
      expect(await h.waitState(c2, ['Complete'])).toMatchObject({ exit_code: 1 });
      expect(await h.text(c2, 'stdout')).toBe('started\n');
      expect(await h.text(c2, 'system')).toMatch(
        /whole state not resumed \(starting afresh\): the checkpoint was saved whole by the process runtime, not saved whole by the runc runtime/,
      );
      // criu was never asked to restore anything.
      expect(await readFile(join(dir, 'calls'), 'utf8').catch(() => '')).toBe('');
    },
  );
});
