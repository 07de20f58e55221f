// `berth sim pack` in-process: a hand-computed schedule, and bad flags rejected naming the flag.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { berthInProcess as berth } from '../helpers/cli.js';
import { writeCliWorld } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-sim-pack-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const { workload, config } = writeCliWorld(dir);

describe('berth sim pack', () => {
  it('prints the packed cost against the lower bound (hand-computed)', async () => {
    const r = await berth('sim', 'pack', workload, '--config', config, '--json');
    expect(r.code).toBe(0);
    // a and b share one t4 (created 60 s before a, until b ends at 210 s: 270 s); c, an hour later,
    // gets its own (60 + 600 s). 0.2 $/h × 930 s. Bound: vcpu-weighted shares, 0.2 × (25 + 50 + 600) s.
    // Alone: (160 + 260 + 660) s.
    expect(JSON.parse(r.stdout)).toMatchObject({
      cost: 0.051667,
      lowerBound: 0.0375,
      ratio: 1.3778,
      instances: 2,
      boot: 0.006667,
      alone: 0.06,
      unfit: 0,
      bootMs: 60_000,
      method: 'arrival',
      estimates: 'exact',
    });
  });

  it('rejects bad flags, naming them', async () => {
    const bad = async (args: string[], message: string) => {
      const r = await berth('sim', 'pack', workload, ...args);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(message);
    };
    await bad(
      ['--estimates', 'guess'],
      '--estimates: expected one of exact, requested, user, size, step, none, got "guess"',
    );
    await bad(['--method', 'random'], '--method: expected arrival, decreasing or wait, got "random"');
    await bad(
      ['--method', 'decreasing', '--estimates', 'requested'],
      '--method decreasing: clairvoyant only',
    );
    await bad(
      ['--method', 'wait', '--max-wait', 'later'],
      '--max-wait: expected a duration such as 60s, got "later"',
    );
    await bad(['--lookahead', 'soon'], '--lookahead: expected a duration such as 0s or 5m, got "soon"');
    const missing = await berth('sim', 'pack', join(dir, 'nope.json'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nope.json: cannot read');
  });
});
