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
