// Issue 10 item 4: a container's output is bounded. Past the log limit the agent keeps the head and a
// rolling tail of each stream and says so; the output files give their disk back as they are shipped;
// output on disk counts against the scratch limit; the exit is reported once what is left is shipped.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, type RuntimeName } from '../../src/agent/runtimes/detect.js';
import { itIf } from '../helpers/needs.js';
import { TEST_IMAGE, TEST_ROOTFS_TAR, rootfsMissing } from '../agent/helpers.js';
import { Harness, until } from './harness.js';

const KiB = 1024;
const MiB = 1024 * KiB;
let node: Awaited<ReturnType<Harness['node']>>;
const ids: string[] = [];
const h = Harness.forFile(ids);

beforeAll(async () => {
  node = await h.node();
  h.startAgent(node, { logLimitBytes: MiB });
});

/** n numbered lines of about 100 bytes. */
const numbered = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix} ${String(i).padStart(6, '0')} ${'x'.repeat(88)}\n`).join('');
const printLines = (prefix: string, n: number, fd = 1) =>
  `i=0; while [ $i -lt ${n} ]; do printf '${prefix} %06d %s\\n' $i ${'x'.repeat(88)} >&${fd}; i=$((i+1)); done`;

/** stored = a head of `full` followed by a tail of `full` that starts at a line; returns where each part is. */
function headAndTail(stored: string, full: string): { head: number; tailFrom: number } {
  let longest = 0;
  while (longest < stored.length && stored[longest] === full[longest]) longest++;
  // The head may end inside a line whose rest happens to begin like the tail's first line: step back.
  for (let head = longest; head >= 0; head--) {
    const tail = stored.slice(head);
    const tailFrom = full.length - tail.length;
    if (full.endsWith(tail) && (tail.length === 0 || full[tailFrom - 1] === '\n')) return { head, tailFrom };
  }
  throw new Error('the stored output is not a head and a tail of what the container printed');
}

const engines: { name: RuntimeName; image: string }[] = [
  { name: 'runc', image: TEST_ROOTFS_TAR },
  { name: 'docker', image: TEST_IMAGE },
  { name: 'podman', image: TEST_ROOTFS_TAR },
];
const cases: { name: RuntimeName; image: string | null; missing: string | null }[] = [
  { name: 'process', image: null, missing: null },
  ...(await Promise.all(
    engines.map(async (e) => ({
      ...e,
      missing: (await createRuntime(e.name).available()) ?? rootfsMissing(),
    })),
  )),
];

describe('output past the log limit (1MiB here: head 512KiB, tail 256KiB per stream)', () => {
  for (const rt of cases)
    itIf(rt.missing)(
      `${rt.name}: keeps the head and the last part of each stream, says what it left out, and reports the exit`,
      { timeout: 120_000 },
      async () => {
        const n = rt.name === 'process' ? node : await h.node();
        if (rt.name !== 'process') h.startAgent(n, { runtime: rt.name, logLimitBytes: MiB });
        const id = await h.submitAndAssign(n, {
          ...(rt.image ? { image: rt.image } : {}),
          command: ['sh', '-c', `${printLines('out', 20000)}; ${printLines('err', 6000, 2)}; exit 4`],
        });
        ids.push(id);
        const c = await h.waitState(id, ['Complete', 'Cancelled'], 90_000);
        expect(c).toMatchObject({ state: 'Complete', exit_code: 4 });
        const out = await h.text(id, 'stdout');
        const err = await h.text(id, 'stderr');
        const system = await h.text(id, 'system');
        expect(out.length + err.length).toBeLessThanOrEqual(MiB);
        const o = headAndTail(out, numbered('out', 20000));
        const e = headAndTail(err, numbered('err', 6000));
        expect(o.head + e.head).toBeLessThanOrEqual(512 * KiB);
        expect(o.head + e.head).toBeGreaterThan(512 * KiB - 100); // the head is used up
        expect(out.length - o.head).toBeGreaterThan(250 * KiB); // the tail of stdout is there
        expect(out.length - o.head).toBeLessThanOrEqual(256 * KiB);
        expect(out.endsWith(`out 019999 ${'x'.repeat(88)}\n`)).toBe(true);
        expect(system).toMatch(
          /berth: output reached the log limit \(1MiB\): the first 512KiB are kept; from now on only the last 256KiB of stdout and of stderr, sent when the container ends\n/,
        );
        expect(system).toMatch(/berth: [\d.]+(KiB|MiB) of stdout left out \(log limit 1MiB/);
      },
    );
  it(
    'gives the disk of shipped and dropped output back while the container runs',
    { timeout: 120_000 },
    async () => {
      const id = await h.submitAndAssign(node, {
        command: ['sh', '-c', 'yes berth | head -c 67108864; echo; echo written >&2; sleep 60'],
      });
      ids.push(id);
      const file = join(node.workDir, 'containers', id, 'run', 'stdout');
      // Past the head, stderr too is kept for the end: watch its file on the instance.
      await until(
        async () => (await readFile(join(file, '..', 'stderr'), 'utf8').catch(() => '')).includes('written'),
        60_000,
        'the output written',
      );
      const size = (await stat(file)).size;
      expect(size).toBeGreaterThanOrEqual(64 * MiB);
      // 64MiB were written; on disk only what is neither shipped nor dropped stays (the tail, a punch step).
      await until(
        async () => (await stat(file)).blocks * 512 < 10 * MiB,
        20_000,
        'the disk space given back',
      );
      await h.store.containers.cancel(id, { kind: 'user', owner: null }, 'user', 'test done');
      await until(
        async () => (await h.store.containers.get(id)).exit_code !== null,
        30_000,
        'the exit report',
      );
      const out = await h.text(id, 'stdout');
      expect(out.length).toBeLessThanOrEqual(MiB);
      expect(await h.text(id, 'system')).toMatch(/of stdout left out/);
    },
  );

  it('output on disk counts against the scratch limit: a container past it is killed with the reason', async () => {
    const id = await h.submitAndAssign(node, {
      command: ['sh', '-c', 'yes berth | head -c 10485760; echo written >&2; sleep 60'],
      scratch: '1MiB',
    });
    ids.push(id);
    const c = await h.waitState(id, ['Complete', 'Cancelled'], 60_000);
    expect(c.state).toBe('Complete');
    expect(c.runtime_status).toMatch(/^killed: scratch [\d.]+(KiB|MiB) > limit 1MiB/);
  });
});
