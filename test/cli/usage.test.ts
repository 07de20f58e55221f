// `berth usage` against a real API server (the --report path is in test/sim/run-cli.test.ts): the
// right-sizing table and its JSON from the usage agents recorded, by name and by owner, hand-computed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld } from '../helpers/cli-inproc.js';

const GiB = 1024 ** 3;
let w: Awaited<ReturnType<typeof cliWorld>>;

beforeAll(async () => {
  w = await cliWorld();
  // alice's "align" twice: 4 cpus and 8 GiB asked; 100 s each, using 1 and 2 cores, peaks 1 and 2 GiB.
  for (const [cpu, peak] of [
    [100, GiB],
    [200, 2 * GiB],
  ] as const) {
    const r = await w.berth(['submit', '--name', 'align', '--cpus', '4', '--ram', '8GiB', '--', 'x']);
    expect(r.code, r.stderr).toBe(0);
    const id = await w.current(r.stdout.trim());
    await w.runAttempt(id, '', 0, { cpu_seconds: cpu, peak_ram: peak, wall_ms: 100_000 });
  }
});
afterAll(() => w?.close());

describe('berth usage (from the API)', () => {
  it('by name: asked, used, suggested and saved, as a table and as JSON', async () => {
    const r = await w.berth(['usage']);
    expect(r.code, r.stderr).toBe(0);
    // Cores 1 and 2: mean 1.5, p95 (nearest rank) 2 → suggest 2. Asked 4 × 200 s = 0.2222 cpu-h,
    // suggested 2 × 200 s = 0.1111: saves 0.111 (50 %).
    expect(r.stdout).toMatch(/^NAME\s+DONE\s+CPUS ASKED/);
    expect(r.stdout).toMatch(/\nalign\s+2\s+4\s+1\.5\/2\s+2\s+0\.111 \(50%\)\s+8GiB\s+2GiB\s/);
    const j = JSON.parse((await w.berth(['usage', '--json'])).stdout);
    expect(j.by).toBe('name');
    // Peak 2 GiB × 1.2 = 2.4 GiB, rounded up to 64 MiB: 2.4375 GiB. 8 GiB × 200 s = 0.4444 GiB-h,
    // 2.4375 GiB × 200 s = 0.1354: saves 0.309 (69.5 %).
    expect(j.items).toEqual([
      {
        key: 'align',
        containers: 2,
        cpu: {
          measured: 2,
          asked: { min: 4, max: 4 },
          used: { mean: 1.5, p95: 2 },
          suggested: 2,
          askedHours: 0.2222,
          suggestedHours: 0.1111,
          savedHours: 0.1111,
          savedShare: 0.5,
        },
        ram: {
          measured: 2,
          asked: { min: 8 * GiB, max: 8 * GiB },
          used: { max: 2 * GiB },
          suggested: 2.4375 * GiB,
          askedGiBHours: 0.4444,
          suggestedGiBHours: 0.1354,
          savedGiBHours: 0.309,
          savedShare: 0.6953,
        },
      },
    ]);
  });

  it('--by owner (admin), and --since after the runs finds nothing', async () => {
    const r = await w.berth(['usage', '--by', 'owner'], w.t.tokens.admin);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^OWNER\s+DONE/);
    expect(r.stdout).toMatch(/\nalice\s+2\s+4\s+1\.5\/2\s/);
    const later = new Date(w.t.clock.now().getTime() + 3_600_000).toISOString();
    const none = await w.berth(['usage', '--since', later]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toBe('no completed containers\n');
  });
});
