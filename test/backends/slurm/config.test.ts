// The slurm backend's config: defaults, validation naming the key, and the docs' table.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configuredBackend, loadSlurmConfig, parseSlurmConfig } from '../../../src/backends/slurm/config.js';
import { ConfigError } from '../../../src/config/declare.js';

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
      reuseAllocation: { enabled: true, maxContainers: 100, maxTimeMs: 3_600_000 },
    });
    expect(c.agentCommand[0]).toBe(process.execPath);
    expect(c.agentCommand[1]).toMatch(/bin\/berth\.js$/);
    expect(c.agentEnv.PATH).toContain('/usr/bin');
  });

  it.each([
    [{ nope: 1 }, 'f.json: nope: unknown field'],
    [{ backend: 'cloud' }, 'f.json: backend: expected one of slurm, got "cloud"'],
    [
      { cluster: 'Has Caps' },
      'f.json: cluster: expected lower-case letters, digits and - (at most 32), got "Has Caps"',
    ],
    [
      { partition: 'a b' },
      'f.json: partition: expected a partition name (or a comma-separated list), got "a b"',
    ],
    [{ ram_overhead: '4 gigs' }, /^f\.json: ram_overhead: .*4GiB/],
    [{ time_margin: 'soon' }, /^f\.json: time_margin: .*duration/],
    [
      { sbatch_args: ['qos=x'] },
      'f.json: sbatch_args[0]: expected an sbatch option starting with - or --, got "qos=x"',
    ],
    [{ features: { big: 'a b' } }, 'f.json: features.big: expected a feature name, got "a b"'],
    [{ features: { 'a b': 'big' } }, 'f.json: features.a b: expected an instance type name as the key'],
    [
      { agent_env: { 'A-B': 'x' } },
      'f.json: agent_env.A-B: expected an environment variable name as the key',
    ],
    [{ agent_env: { A: 'x\ny' } }, 'f.json: agent_env.A: expected a string without NUL or newline'],
    [
      { agent_runtime: 'lxc' },
      'f.json: agent_runtime: expected one of auto, docker, podman, runc, process, got "lxc"',
    ],
    [{ agent_ping_wait: '2m' }, /^f\.json: agent_ping_wait: .*60s/],
    [{ agent_command: [] }, 'f.json: agent_command: expected a non-empty list of strings, got an array'],
    [{ work_dir: 'relative' }, 'f.json: work_dir: expected an absolute path, got "relative"'],
    [{ max_jobs: 0 }, /^f\.json: max_jobs: expected .*, got 0/],
    [{ lower_nice: 'yes' }, /^f\.json: lower_nice: expected .*, got "yes"/],
    [{ api_url: 'ftp://x' }, /^f\.json: api_url: expected .*http/],
    [
      { reuse_allocation: { max_containers: 0 } },
      /^f\.json: reuse_allocation\.max_containers: expected .*, got 0/,
    ],
    [{ reuse_allocation: { max_time: 'long' } }, /^f\.json: reuse_allocation\.max_time: .*duration/],
    [{ reuse_allocation: { enable: true } }, 'f.json: reuse_allocation.enable: unknown field'],
  ])('%j is refused with the file and the key named', (value, message) => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-slurm-config-'));
    try {
      writeFileSync(join(dir, 'f.json'), JSON.stringify(value));
      let err: unknown;
      try {
        loadSlurmConfig(join(dir, 'f.json'));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      const text = (err as Error).message.replace(`${dir}/`, '');
      if (typeof message === 'string') expect(text).toContain(message);
      else expect(text).toMatch(message);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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

  it('the overrides of --backend win over the file', () => {
    expect(parseSlurmConfig({ tag: 'east' }).tag).toBe('east');
    expect(() => parseSlurmConfig({ tag: 'East' })).toThrow(ConfigError);
  });
});
