// Measurements for docs/performance/agent.md (not assertions on speed): run with
//   BERTH_MEASURE=1 npx vitest run --config vitest.measure.config.ts
// Prints the agent's RSS idle and with N `sleep` containers, and log throughput with a count check.
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt } from '../helpers/cli.js';
import { Harness, until } from './harness.js';

const enabled = process.env.BERTH_MEASURE === '1';
let h: Harness;

beforeAll(async () => {
  if (!enabled) return;
  assertBuilt();
  h = await Harness.create();
});
afterAll(async () => h?.cleanup());

async function rssKiB(pid: number): Promise<number> {
  const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

describe.runIf(enabled)('agent measurements', () => {
  it('RSS idle and with N sleeping containers', async () => {
    const node = await h.node();
    const a = h.spawnAgent(node, [], h.url);
    await until(async () => (await h.store.nodes.get(node.id)).registered_at, 20_000, 'registered');
    await new Promise((r) => setTimeout(r, 3000)); // measurement, not a wait for a condition
    const idle = await rssKiB(a.child.pid!);
    const n = Number(process.env.BERTH_MEASURE_N ?? 50);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await h.submitAndAssign(node, { command: ['sleep', '600'] }));
    for (const id of ids) await h.waitState(id, ['Running'], 60_000);
    await new Promise((r) => setTimeout(r, 6000)); // a few usage samples and pings
    const busy = await rssKiB(a.child.pid!);
    console.log(`agent RSS: idle ${idle} KiB; with ${n} running sleep containers ${busy} KiB`);
    for (const id of ids)
      await h.store.containers.cancel(id, { kind: 'user', owner: null }, 'user', 'measured');
    for (const id of ids) await h.waitState(id, ['Cancelled']);
    expect(idle).toBeGreaterThan(0);
  }, 300_000);

  it('log throughput from a chatty container to the API', async () => {
    const node = await h.node();
    h.spawnAgent(node, [], h.url);
    await until(async () => (await h.store.nodes.get(node.id)).registered_at, 20_000, 'registered');
    const lines = Number(process.env.BERTH_MEASURE_LINES ?? 1_000_000);
    const t0 = Date.now();
    const id = await h.submitAndAssign(node, { command: ['seq', '1', String(lines)] });
    const c = await h.waitState(id, ['Complete'], 600_000);
    const ms = Date.now() - t0;
    const r = await h.store.ctx.pool.query(
      `SELECT count(*)::int AS chunks, sum(length(data))::bigint AS bytes,
              sum(length(data) - length(replace(data, E'\\n', '')))::int AS lines
       FROM log_chunks WHERE container_id = $1 AND stream = 'stdout'`,
      [id],
    );
    const { chunks, bytes, lines: got } = r.rows[0];
    console.log(
      `log throughput: ${got} lines (${bytes} bytes, ${chunks} chunks) in ${ms} ms from assign to Complete ` +
        `= ${Math.round(got / (ms / 1000))} lines/s; container wall ${c.usage?.wall_ms} ms`,
    );
    expect(got).toBe(lines);
    expect(await h.text(id, 'stdout')).toBe(Array.from({ length: lines }, (_, i) => `${i + 1}\n`).join(''));
  }, 600_000);
});
