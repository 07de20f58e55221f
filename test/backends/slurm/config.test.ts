// The slurm backend's config: defaults, validation naming the key, and the docs' table.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  configuredBackend,
  loadSlurmConfig,
  parseSlurmConfig,
  SLURM_KEYS,
  SlurmConfigError,
} from '../../../src/backends/slurm/config.js';

describe('slurm config', () => {
  it('defaults', () => {
    const c = parseSlurmConfig({});
    expect(c).toMatchObject({
      backend: 'slurm',
      cluster: 'slurm',
      tag: 'default',
      partition: null,
      ramOverhead: 256 * 1024 ** 2,
      timeMarginMs: 300_000,
      agentRuntime: 'auto',
      agentKillGraceMs: 10_000,
      workDir: '/tmp/berth-slurm',
      jobOutput: '/dev/null',
      maxJobs: 10_000,
      niceSpread: 100,
    });
    expect(c.agentCommand[0]).toBe(process.execPath);
    expect(c.agentCommand[1]).toMatch(/bin\/berth\.js$/);
    expect(c.agentEnv.PATH).toContain('/usr/bin');
  });

  it.each([
    [{ nope: 1 }, /nope: unknown key for the slurm backend \(known: backend, cluster/],
    [{ backend: 'cloud' }, /backend: expected "slurm", got "cloud"/],
    [{ cluster: 'Has Caps' }, /cluster: expected lower-case letters/],
    [{ partition: 'a b' }, /partition: expected a partition name/],
    [{ ram_overhead: '4 gigs' }, /ram_overhead: expected a size such as 4GiB/],
    [{ time_margin: 'soon' }, /time_margin: expected a duration/],
    [{ sbatch_args: ['qos=x'] }, /sbatch_args: expected a list of sbatch options/],
    [
      { features: { big: 'a b' } },
      /features: expected an object of instance type → feature name \(bad entry "big"\)/,
    ],
    [{ agent_runtime: 'lxc' }, /agent_runtime: expected one of auto, docker, podman, runc, process/],
    [{ agent_ping_wait: '2m' }, /agent_ping_wait: expected a duration of at most 60s/],
    [{ agent_command: [] }, /agent_command: expected a non-empty list/],
    [{ work_dir: 'relative' }, /work_dir: expected an absolute path/],
    [{ max_jobs: 0 }, /max_jobs: expected a whole number ≥ 1, got 0/],
    [{ lower_nice: 'yes' }, /lower_nice: expected true or false/],
    [{ api_url: 'ftp://x' }, /api_url: expected an http\(s\) URL/],
  ])('%j is refused with the key named', (value, message) => {
    expect(() => parseSlurmConfig(value, 'f.json')).toThrow(SlurmConfigError);
    expect(() => parseSlurmConfig(value, 'f.json')).toThrow(message);
  });

  it('a config file says which backend it is for (cloud when it does not say)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-slurm-config-'));
    try {
      const file = (name: string, body: string) => {
        writeFileSync(join(dir, name), body);
        return join(dir, name);
      };
      expect(configuredBackend(file('s.json', '{"backend": "slurm", "partition": "p"}'))).toBe('slurm');
      expect(configuredBackend(file('c.json', '{"cluster": "x"}'))).toBe('cloud');
      expect(configuredBackend(file('bad.json', '{nope'))).toBe('cloud');
      expect(configuredBackend(null)).toBe('cloud');
      expect(loadSlurmConfig(join(dir, 's.json')).partition).toBe('p');
      expect(() => loadSlurmConfig(join(dir, 'bad.json'))).toThrow(/bad\.json: .*JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('docs/SLURM.md lists every key', () => {
    const doc = readFileSync(new URL('../../../docs/SLURM.md', import.meta.url), 'utf8');
    for (const k of SLURM_KEYS) expect(doc, k.key).toContain(`| \`${k.key}\` |`);
  });
});
