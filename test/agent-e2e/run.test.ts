// The agent in-process against a real API server: output complete and in order, exit codes, usage,
// cancel within the grace, max_run_time, an image the runtime cannot run, a warning as a system line.
import { beforeAll, describe, expect, it } from 'vitest';
import { cgroupsUnusable } from '../../src/agent/runtimes/cgroup.js';
import { itIf } from '../helpers/needs.js';
import { Harness, until } from './harness.js';

const cgroupsMissing = await cgroupsUnusable();
let node: Awaited<ReturnType<Harness['node']>>;
/** A node whose agent (started by the cancel tests) has a kill grace of 5 s. */
let patient: Awaited<ReturnType<Harness['node']>>;
let patientLines: string[];
// The runtime removes every container's cgroup (Harness.forFile checks after the tests).
const ids: string[] = [];
const h = Harness.forFile(ids);

beforeAll(async () => {
  node = await h.node();
  patient = await h.node();
  h.startAgent(node);
  // A grace long enough for a TERM trap's echo on a loaded machine, short enough for a test.
  ({ lines: patientLines } = h.startAgent(patient, { killGraceMs: 5000 }));
});

async function run(input: Parameters<Harness['submit']>[0]) {
  const id = await h.submitAndAssign(node, input);
  ids.push(id);
  return id;
}

/** Runs `trap` then a loop on the patient node, cancels it once it printed "ready", waits for its exit. */
async function cancelWhileRunning(trap: string) {
  const id = await h.submitAndAssign(patient, {
    command: ['sh', '-c', `${trap}; echo ready; while :; do sleep 0.1; done`],
  });
  ids.push(id);
  await until(async () => (await h.text(id, 'stdout')).includes('ready'), 15_000, 'ready');
  await h.store.containers.cancel(id, { kind: 'user', owner: null }, 'user', 'test cancel');
  const c = await until(
    async () => {
      const c = await h.store.containers.get(id);
      return c.exit_code !== null ? c : null;
    },
    30_000,
    'the exit report after the cancel',
  );
  return { id, c };
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

  it('a cancel stops the container (SIGTERM, SIGKILL after the grace); its last output, exit code and usage are kept', async () => {
    // The agent ships what it printed after the TERM and reports the exit within the cancel grace.
    const { id, c } = await cancelWhileRunning('trap "echo got TERM" TERM');
    expect(c).toMatchObject({ state: 'Cancelled', failure_class: 'user', exit_code: 137 }); // TERM trapped
    expect(c.usage!.wall_ms).toBeGreaterThan(4900); // it ran on through the 5 s grace
    expect(await h.text(id, 'stdout')).toBe('ready\ngot TERM\n');
    expect(patientLines.some((l) => l.includes(`container ${id}: exited 137 (cancelled)`))).toBe(true);
  });

  it("a cancel: a TERM trap's last words and its own exit code arrive (issue 10 item 8)", async () => {
    const { id, c } = await cancelWhileRunning('trap "echo bye; exit 3" TERM');
    expect(c).toMatchObject({ state: 'Cancelled', exit_code: 3 });
    expect(await h.text(id, 'stdout')).toBe('ready\nbye\n');
    const req = await h.store.requests.get(c.request_id);
    expect(req.outcome).toBe('cancelled');
  });

  itIf(cgroupsMissing)(
    'a child OOM-killed while the main process exits 0: a success that says so (issue 10 item 14)',
    async () => {
      const id = await run({
        command: ['sh', '-c', 'head -c 300m /dev/zero | tail; echo "survived $?"'],
        ram: '64MiB',
      });
      const c = await h.waitState(id, ['Complete', 'Cancelled'], 30_000);
      expect(c).toMatchObject({ state: 'Complete', exit_code: 0, oom_killed: true });
      const req = await h.store.requests.get(c.request_id);
      expect(req.outcome).toBe('success');
      expect(req.final_reason).toBe(
        'completed with exit code 0, but a process in it was killed for memory (OOM: the container reached its memory limit); its work may be incomplete',
      );
      const events = (
        await h.store.ctx.pool.query(`SELECT kind, message FROM container_events WHERE container_id = $1`, [
          id,
        ])
      ).rows as { kind: string; message: string }[];
      expect(events.filter((e) => e.kind === 'warning').map((e) => e.message)).toEqual([
        'warning: a process in it was killed for memory (OOM: the container reached its memory limit); its work may be incomplete',
      ]);
      expect(await h.text(id, 'system')).toMatch(/^berth: warning: a process in it was killed for memory/m);
      expect(await h.text(id, 'stdout')).toBe('survived 137\n');
    },
  );

  it('max_run_time kills the container and the reason is recorded', async () => {
    const id = await run({ command: ['sleep', '60'], max_run_time: '1s' });
    const c = await h.waitState(id, ['Complete', 'Cancelled'], 20_000);
    expect(c.state).toBe('Complete');
    expect(c.exit_code).toBe(143); // SIGTERM
    expect(c.runtime_status).toMatch(/max_run_time 1s exceeded/);
    expect(await h.text(id, 'system')).toMatch(/killed: max_run_time 1s exceeded: sending SIGTERM/);
  });

  it('an image on a node with no image runtime is cancelled perm, not retryable: the request ends after one attempt', async () => {
    const id = await run({ command: ['true'], image: 'no-such-image:latest', container_count_max: 3 });
    const c = await h.waitState(id, ['Complete', 'Cancelled']);
    expect(c.state).toBe('Cancelled');
    expect(c.failure_class).toBe('perm');
    const why =
      'image runtime could not start it: image "no-such-image:latest": this node has no runtime for images (docker, podman or runc): the agent runs with --runtime process';
    expect(c.runtime_status).toBe(why);
    // Two attempts were left, yet none is spent: the request ends with this one.
    const req = await h.store.requests.get(c.request_id);
    expect(req).toMatchObject({ state: 'Final', outcome: 'failed', attempts: 1 });
    expect(req.final_reason).toBe(`${why} (not retryable)`);
    const containers = await h.store.ctx.pool.query(`SELECT id FROM containers WHERE request_id = $1`, [
      c.request_id,
    ]);
    expect(containers.rows.map((r: { id: string }) => r.id)).toEqual([id]);
    // The node said what it can run when it registered.
    expect((await h.store.nodes.get(node.id)).info).toMatchObject({
      runtime: 'process',
      image_runtime: null,
      process_sandbox: 'bwrap',
      container_network: 'none',
    });
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
