// The agent in-process against a real API server: output complete and in order, exit codes, usage,
// cancel within the grace, max_run_time, an image the runtime cannot run, a warning as a system line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cgroupsUnusable } from '../../src/agent/runtimes/cgroup.js';
import { Harness, until } from './harness.js';

let h: Harness;
let node: Awaited<ReturnType<Harness['node']>>;
let lines: string[];
const ids: string[] = [];

beforeAll(async () => {
  h = await Harness.create();
  node = await h.node();
  ({ lines } = h.startAgent(node));
});
afterAll(async () => {
  await h?.cleanup();
  // The runtime removed every container's cgroup.
  expect(Harness.leftCgroups(ids)).toEqual([]);
});

async function run(input: Parameters<Harness['submit']>[0]) {
  const id = await h.submitAndAssign(node, input);
  ids.push(id);
  return id;
}

describe('agent (in-process, process runtime)', () => {
  it('registers the node and reports it idle', async () => {
    await until(
      async () =>
        (await h.store.nodes.get(node.id)).state === 'idle' &&
        (await h.store.nodes.get(node.id)).registered_at,
      10_000,
      'registered',
    );
  });

  it('ships 20,000 numbered lines per stream complete and in order, and passes the exit code', async () => {
    const id = await run({
      command: [
        'sh',
        '-c',
        'i=0; while [ $i -lt 20000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; exit 3',
      ],
    });
    const c = await h.waitState(id, ['Complete', 'Cancelled'], 60_000);
    expect(c.state).toBe('Complete');
    expect(c.exit_code).toBe(3);
    const expected = (p: string) => Array.from({ length: 20000 }, (_, i) => `${p} ${i}\n`).join('');
    expect(await h.text(id, 'stdout')).toBe(expected('out'));
    expect(await h.text(id, 'stderr')).toBe(expected('err'));
    const seqs = (await h.logs(id)).map((l) => l.seq);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i));
  });

  it('reports usage (wall time; CPU and peak memory when cgroups are usable)', async () => {
    const id = await run({
      command: ['sh', '-c', 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done'],
    });
    const c = await h.waitState(id, ['Complete', 'Cancelled']);
    expect(c).toMatchObject({ state: 'Complete', exit_code: 0 });
    expect(c.usage!.wall_ms).toBeGreaterThan(0);
    if ((await cgroupsUnusable()) === null) {
      expect(c.usage!.cpu_seconds).toBeGreaterThan(0);
      expect(c.usage!.peak_ram).toBeGreaterThan(0);
    } else {
      expect(await h.text(id, 'system')).toMatch(/warning: process runtime: .*without CPU and memory limits/);
    }
  });

  it('sends usage samples with the ping; the API stores them on the running container', async () => {
    const id = await run({
      command: ['sh', '-c', 'x=$(head -c 30000000 /dev/zero | tr "\\0" a); sleep 3; echo ${#x}'],
    });
    const sampled = await until(
      async () => {
        const c = await h.store.containers.get(id);
        const u = c.usage as unknown as { sampled_at?: string; peak_ram: number } | null;
        return c.state === 'Running' && u?.sampled_at ? u : null;
      },
      15_000,
      'a usage sample on the running container',
    );
    if ((await cgroupsUnusable()) === null) expect(sampled.peak_ram).toBeGreaterThan(0);
    const c = await h.waitState(id, ['Complete']);
    expect(c.usage).not.toHaveProperty('sampled_at'); // the exit report replaced the sample
    expect(await h.text(id, 'stdout')).toBe('30000000\n');
  });

  it('a cancel stops the container: SIGTERM, then SIGKILL after the kill grace', async () => {
    const id = await run({
      command: ['sh', '-c', 'trap "echo got TERM" TERM; echo ready; while :; do sleep 0.1; done'],
    });
    await h.waitState(id, ['Running']);
    await until(async () => (await h.text(id, 'stdout')).includes('ready'), 10_000, 'ready');
    await h.store.containers.cancel(id, { kind: 'user', owner: null }, 'user', 'test cancel');
    // The agent reports nothing more (its token is revoked) and forgets the container once it ended.
    await until(
      () => (!lines.some((l) => l.includes(`container ${id}: exit`)) ? null : true),
      15_000,
      'the exit after the kill',
    );
    const exitLine = lines.find((l) => l.includes(`container ${id}: exit`))!;
    expect(exitLine).toMatch(/exit 137 not recorded \(it was cancelled\)/); // 128 + SIGKILL: TERM was trapped
    expect((await h.store.containers.get(id)).state).toBe('Cancelled');
  });

  it('max_run_time kills the container and the reason is recorded', async () => {
    const id = await run({ command: ['sleep', '60'], max_run_time: '1s' });
    const c = await h.waitState(id, ['Complete', 'Cancelled'], 20_000);
    expect(c.state).toBe('Complete');
    expect(c.exit_code).toBe(143); // SIGTERM
    expect(c.runtime_status).toMatch(/max_run_time 1s exceeded/);
    expect(await h.text(id, 'system')).toMatch(/killed: max_run_time 1s exceeded: sending SIGTERM/);
  });

  it('an image the runtime cannot run is cancelled perm with the reason', async () => {
    const id = await run({ command: ['true'], image: 'no-such-image:latest' });
    const c = await h.waitState(id, ['Complete', 'Cancelled']);
    expect(c.state).toBe('Cancelled');
    expect(c.failure_class).toBe('perm');
    expect(c.runtime_status).toMatch(/image/);
  });

  it('tiny chunks never split a UTF-8 character: multibyte text arrives intact', async () => {
    const small = await h.node();
    h.startAgent(small, { shipper: { maxChunkBytes: 7, maxBatchBytes: 60, delayMs: 20 } });
    const line = 'héllo wörld € 😀 ✓\n';
    const id = await h.submitAndAssign(small, {
      command: ['sh', '-c', `i=0; while [ $i -lt 300 ]; do printf '%s' '${line}'; i=$((i+1)); done`],
    });
    ids.push(id);
    const c = await h.waitState(id, ['Complete', 'Cancelled'], 60_000);
    expect(c.state).toBe('Complete');
    const chunks = (await h.logs(id)).filter((l) => l.stream === 'stdout');
    expect(chunks.length).toBeGreaterThan(300); // really cut small
    expect(chunks.every((l) => !l.data.includes('\ufffd'))).toBe(true);
    expect(chunks.map((l) => l.data).join('')).toBe(line.repeat(300));
  });

  it('reports busy while running and idle after', async () => {
    const id = await run({ command: ['sleep', '1'] });
    await until(async () => (await h.store.nodes.get(node.id)).state === 'busy', 10_000, 'busy');
    await h.waitState(id, ['Complete']);
    await until(async () => (await h.store.nodes.get(node.id)).state === 'idle', 10_000, 'idle');
  });
});
