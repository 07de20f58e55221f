// `berth plan` through the real CLI entry: snapshot files in test/dispatch/snapshots/NAME.json give
// exactly the bytes in NAME.expected.json; bad input exits 2 with the field named on stderr.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { berthInProcess } from '../helpers/cli.js';

const DIR = join(import.meta.dirname, 'snapshots');
const inputs = readdirSync(DIR)
  .filter((f) => f.endsWith('.json') && !f.endsWith('.expected.json'))
  .sort();

const berth = berthInProcess;

afterEach(() => vi.restoreAllMocks());

describe('berth plan --snapshot FILE', () => {
  it('has snapshot files to run', () => expect(inputs.length).toBeGreaterThanOrEqual(5));

  it.each(inputs)('%s gives the expected output', async (name) => {
    const file = join(DIR, name);
    const r = await berth('plan', '--snapshot', file);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(readFileSync(file.replace(/\.json$/, '.expected.json'), 'utf8'));
    // Deterministic: a second run gives the same bytes.
    expect((await berth('plan', '--snapshot', file)).stdout).toBe(r.stdout);
  });

  it('--pretty indents the same JSON', async () => {
    const file = join(DIR, 'example.json');
    const compact = await berth('plan', '--snapshot', file);
    const pretty = await berth('plan', '--snapshot', file, '--pretty');
    expect(pretty.stdout).toContain('\n  "actions": [');
    expect(JSON.parse(pretty.stdout)).toEqual(JSON.parse(compact.stdout));
  });

  it('reads standard input with --snapshot -', async () => {
    const text = readFileSync(join(DIR, 'example.json'), 'utf8');
    const stdin = Readable.from([Buffer.from(text)]);
    const original = Object.getOwnPropertyDescriptor(process, 'stdin')!;
    Object.defineProperty(process, 'stdin', { value: stdin, configurable: true });
    try {
      const r = await berth('plan', '--snapshot', '-');
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(readFileSync(join(DIR, 'example.expected.json'), 'utf8'));
    } finally {
      Object.defineProperty(process, 'stdin', original);
    }
  });

  describe('errors exit 2 with a message on stderr and nothing on stdout', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'berth-plan-'));
    const write = (name: string, content: string): string => {
      const f = join(tmp, name);
      writeFileSync(f, content);
      return f;
    };
    afterAll(() => rmSync(tmp, { recursive: true, force: true }));

    it.each([
      ['an unknown field', '{"now":"2026-01-01T00:00:00Z","colour":1}', 'colour: unknown field'],
      [
        'a bad container field',
        JSON.stringify({
          now: '2026-01-01T00:00:00Z',
          containers: [
            {
              id: 'c1',
              state: 'Queued',
              priority: 1,
              queued_at: '2026-01-01T00:00:00Z',
              vcpus: 1,
              ram: '4 gigs',
            },
          ],
        }),
        'containers[0].ram: expected a size such as 4GiB, 512MiB or a number of bytes, got "4 gigs"',
      ],
      ['broken JSON', '{"now": ', 'snapshot: not valid JSON'],
    ])('%s', async (_name, content, message) => {
      const f = write('bad.json', content);
      const r = await berth('plan', '--snapshot', f);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`berth: snapshot ${f}: `);
      expect(r.stderr).toContain(message);
    });

    it('a missing file', async () => {
      const r = await berth('plan', '--snapshot', join(tmp, 'nope.json'));
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('cannot read snapshot');
      expect(r.stderr).toContain('ENOENT');
    });
  });
});

// Issue 14's done-when: `berth plan` decides the share rule and batch packing as hand-computed prices say.
// Types priced in proportion to size, 0.05/h per vcpu (and 2 GiB each).
describe('berth plan: share rule and batch packing, hand-computed prices', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'berth-plan-cost-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const FAMILY = [1, 2, 4].map((v) => ({ name: `c${v}`, vcpus: v, ram: `${2 * v}GiB`, price: 0.05 * v }));
  const queued = (id: string) => ({
    id,
    state: 'Queued',
    priority: 1,
    queued_at: '2026-01-01T00:00:00Z',
    vcpus: 1,
    ram: '1GiB',
  });
  async function planOf(snapshot: object) {
    const f = join(tmp, 'snapshot.json');
    writeFileSync(f, JSON.stringify({ now: '2026-01-01T00:01:00Z', instance_types: FAMILY, ...snapshot }));
    const r = await berth('plan', '--snapshot', f);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { actions: { op: string; type?: string; instance?: string }[] };
    const price = new Map(FAMILY.map((t) => [t.name, t.price]));
    const created = out.actions.filter((a) => a.op === 'create').map((a) => a.type!);
    return {
      created,
      perHour: created.reduce((sum, t) => sum + price.get(t)!, 0),
      startedOn: out.actions.filter((a) => a.op === 'start').map((a) => a.instance),
    };
  }
  const idleC4 = {
    id: 'i-1',
    type: 'c4',
    state: 'idle',
    state_since: '2026-01-01T00:00:00Z',
  };

  it('share rule: a 1-vcpu container takes a free quarter of an idle c4 (share 0.2 × 1/4 = 0.05/h)', async () => {
    // Its cheapest type is c1 at 0.05/h; with max_price_factor 1.5 it may pay 0.075/h. The whole c4 is
    // 0.2/h (price rule: not used, a c1 is created, 0.05/h more); its share is 0.2 × max(1/4 vcpu,
    // 1/8 ram) = 0.05/h (share rule: used, nothing created).
    const share = await planOf({
      config: { share_rule: 'share' },
      instances: [idleC4],
      containers: [queued('a')],
    });
    expect(share.startedOn).toEqual(['i-1']);
    expect(share.perHour).toBe(0);
    const price = await planOf({
      config: { share_rule: 'price' },
      instances: [idleC4],
      containers: [queued('a')],
    });
    expect(price.created).toEqual(['c1']);
    expect(price.perHour).toBeCloseTo(0.05, 9);
  });

  it('batch packing: three 1-vcpu containers get a c2 and a c1 (0.15/h), not three c1 nor a half-empty c4', async () => {
    // cost: the first c1 grows into a c2 for b (+0.05/h, b's own share of its cheapest type), not into a c4
    // for c (+0.1/h); c gets a c1: 0.1 + 0.05 = 0.15/h, two boots. off: three c1, 0.15/h, three boots.
    const cs = [queued('a'), queued('b'), queued('c')];
    const cost = await planOf({ config: { share_rule: 'share', batch_packing: 'cost' }, containers: cs });
    expect(cost.created).toEqual(['c2', 'c1']);
    expect(cost.perHour).toBeCloseTo(0.15, 9);
    const off = await planOf({ config: { share_rule: 'share', batch_packing: 'off' }, containers: cs });
    expect(off.created).toEqual(['c1', 'c1', 'c1']);
    expect(off.perHour).toBeCloseTo(0.15, 9);
  });
});
