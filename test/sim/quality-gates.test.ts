// The scheduling-quality gates: CI fails when cost / lower bound of a gate workload rises more than the
// tolerance over the figure recorded in bench/sim-gates.json (record new figures deliberately with
// `npm run sim -- gates --update`, docs/SIMULATOR.md). Also the gates machinery itself.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { reportJson } from '../../src/sim/report/build.js';
import { gatesDir, judge, loadGates, measureGate, recordGates } from '../../src/sim/gates.js';
import { berthInProcess } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

const GATES = fileURLToPath(new URL('../../bench/sim-gates.json', import.meta.url));
const SHARED = fileURLToPath(new URL('../../../shared/traces/', import.meta.url));
const missing = existsSync(SHARED) ? null : `${SHARED} not found (shared/ must sit beside the repo)`;
const dir = mkdtempSync(join(tmpdir(), 'berth-gates-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('quality gates (bench/sim-gates.json)', () => {
  const file = loadGates(GATES);
  // Each gate is run once for its figure; the determinism check runs the first again and compares.
  const runs = new Map<string, ReturnType<typeof measureGate>>();
  const measured = (g: (typeof file.gates)[number]) => {
    if (!runs.has(g.name)) runs.set(g.name, measureGate(g, gatesDir(GATES)));
    return runs.get(g.name)!;
  };

  for (const g of file.gates) {
    itIf(missing)(
      `${g.name}: cost / lower bound within ${file.tolerance * 100}% of the recorded figure`,
      async () => {
        expect(
          g.costRatio,
          `${g.name} has no recorded figure: run npm run sim -- gates --update`,
        ).not.toBeNull();
        const { figures } = await measured(g);
        const v = judge(g.costRatio, figures.costRatio, file.tolerance);
        expect(
          v.ok,
          `${g.name}: cost / lower bound ${figures.costRatio} vs recorded ${g.costRatio} (${((v.change ?? 0) * 100).toFixed(2)}%); ` +
            'if the change is deliberate, record it: npm run sim -- gates --update',
        ).toBe(true);
      },
      120_000,
    );
  }

  itIf(missing)(
    'a gate run is deterministic: the same seed gives the same report bytes',
    async () => {
      const g = file.gates[0]!;
      const a = await measured(g);
      const b = await measureGate(g, gatesDir(GATES));
      expect(reportJson(b.report)).toBe(reportJson(a.report));
    },
    120_000,
  );
});

describe('the gates machinery', () => {
  const workload = join(dir, 'w.json');
  writeFileSync(
    workload,
    JSON.stringify({
      jobs: [
        { arrival: 0, vcpus: 1, ram: '1GiB', duration: '10m' },
        { arrival: '1m', vcpus: 2, ram: '4GiB', duration: '20m' },
      ],
    }),
  );
  const gatesFile = (costRatio: number | null) => {
    const path = join(dir, 'gates.json');
    writeFileSync(
      path,
      JSON.stringify({
        tolerance: 0.02,
        gates: [{ name: 'tiny', workload: 'w.json', seed: 1, cost_ratio: costRatio }],
      }),
    );
    return path;
  };

  it('judge: fails only above recorded × (1 + tolerance)', () => {
    expect(judge(1.2, 1.224, 0.02)).toMatchObject({ ok: true });
    expect(judge(1.2, 1.2241, 0.02)).toMatchObject({ ok: false });
    expect(judge(1.2, 1.0, 0.02).change).toBeCloseTo(-1 / 6, 9);
    expect(judge(null, 1.3, 0.02)).toEqual({ change: null, ok: true });
  });

  const berth = berthInProcess;

  it('berth sim gates exits 1 on a regression, --update records the figures, then it passes', async () => {
    const path = gatesFile(1.0);
    const bad = await berth('sim', 'gates', '--file', path);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/tiny\s+1\.0000\s+\d\.\d{4}\s+\+\d+\.\d\d%.*REGRESSED \(> 2%\)/);
    const up = await berth('sim', 'gates', '--file', path, '--update');
    expect(up.code).toBe(0);
    const recorded = loadGates(path).gates[0]!;
    expect(recorded.costRatio).toBeGreaterThan(1);
    expect(recorded.waitP90).not.toBeNull();
    const good = await berth('sim', 'gates', '--file', path);
    expect(good.code).toBe(0);
    expect(good.stdout).toMatch(/tiny\s+.*\+0\.00%.*ok/);
    // A much better figure passes, with a hint to record it.
    recordGates(
      path,
      new Map([['tiny', { costRatio: recorded.costRatio! * 1.5, waitP90: 0, idleShare: 0 }]]),
    );
    expect((await berth('sim', 'gates', '--file', path)).stdout).toMatch(/better: --update to keep it/);
  });

  it('a bad gates file exits 2 naming the key', async () => {
    const path = join(dir, 'bad.json');
    for (const [content, message] of [
      [{ gates: [] }, /gates: expected a non-empty array/],
      [{ tolerance: 2, gates: [{ name: 'a', workload: 'w.json' }] }, /tolerance: expected a fraction/],
      [{ gates: [{ name: 'a' }] }, /gates\[0\]\.workload: required field is missing/],
      [{ gates: [{ name: 'a', workload: 'w.json', cost: 1 }] }, /gates\[0\]\.cost: unknown field/],
      [
        { gates: [{ name: 'a', workload: 'w.json', limit_jobs: 0 }] },
        /gates\[0\]\.limit_jobs: expected a whole number >= 1/,
      ],
      [
        {
          gates: [
            { name: 'a', workload: 'w.json' },
            { name: 'a', workload: 'w.json' },
          ],
        },
        /gates\[1\]\.name: duplicate name "a"/,
      ],
    ] as Array<[unknown, RegExp]>) {
      writeFileSync(path, JSON.stringify(content));
      const r = await berth('sim', 'gates', '--file', path);
      expect(r.code, JSON.stringify(content)).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    writeFileSync(path, JSON.stringify({ gates: [{ name: 'a', workload: 'missing.json' }] }));
    const r = await berth('sim', 'gates', '--file', path);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/gate a: .*missing\.json: cannot read/);
    expect(readFileSync(path, 'utf8')).toContain('missing.json');
  });
});
