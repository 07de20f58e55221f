// A container as sbatch options, the batch script, and what sbatch's refusals mean.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { parseSlurmConfig } from '../../../src/backends/slurm/config.js';
import {
  batchScript,
  classifySbatchError,
  NICE_MAX,
  parseJobId,
  sbatchArgs,
  shellQuote,
  submitEnvironment,
  type SubmitSpec,
} from '../../../src/backends/slurm/sbatch.js';

const MIB = 1024 ** 2;
const GIB = 1024 ** 3;
const cfg = parseSlurmConfig({
  partition: 'batch',
  account: 'lab',
  sbatch_args: ['--qos=berth'],
  features: { 'gpu-a100': 'a100', big: 'bigmem', large: 'bigmem' },
});
const spec = (o: Partial<SubmitSpec> = {}): SubmitSpec => ({
  id: 'c-0000000000000001',
  vcpus: 1,
  ram: GIB,
  scratch: 0,
  gpus: 0,
  instanceTypes: null,
  maxRunTimeMs: null,
  ...o,
});
const args = (o: Partial<SubmitSpec> = {}, nice = 0) => {
  const r = sbatchArgs(spec(o), cfg, { nice, marker: 'berth:slurm/default' });
  if (!r.ok) throw new Error(r.reason);
  return r.args;
};

describe('sbatchArgs', () => {
  it('a plain container', () => {
    expect(args()).toEqual([
      '--parsable',
      '--job-name=c-0000000000000001',
      '--comment=berth:slurm/default',
      '--no-requeue',
      '--nice=0',
      '--nodes=1',
      '--ntasks=1',
      '--cpus-per-task=1',
      '--mem=1280M',
      '--partition=batch',
      '--account=lab',
      '--output=/dev/null',
      '--chdir=/tmp',
      '--qos=berth',
    ]);
  });

  it.each([
    ['fractional CPUs round up', { vcpus: 0.25 }, '--cpus-per-task=1'],
    ['2.5 CPUs → 3', { vcpus: 2.5 }, '--cpus-per-task=3'],
    ['ram + overhead, rounded up to MiB', { ram: 100 * MIB + 1 }, '--mem=357M'],
    ['scratch → --tmp', { scratch: 10 * GIB }, '--tmp=10240M'],
    ['GPUs → --gres', { gpus: 2 }, '--gres=gpu:2'],
    ['max_run_time + 5m margin, in minutes', { maxRunTimeMs: 90_000 }, '--time=7'],
    ['one instance type → its feature', { instanceTypes: ['gpu-a100'] }, '--constraint=a100'],
    ['several → OR, once each', { instanceTypes: ['big', 'gpu-a100', 'large'] }, '--constraint=bigmem|a100'],
  ])('%s', (_, o, expected) => {
    expect(args(o)).toContain(expected);
  });

  it('leaves out what the container does not ask for', () => {
    const a = args().join(' ');
    expect(a).not.toMatch(/--tmp|--gres|--time|--constraint/);
  });

  it('nice within SLURM’s range, never negative', () => {
    expect(args({}, 12.4)).toContain('--nice=12');
    expect(args({}, -5)).toContain('--nice=0');
    expect(args({}, 1e12)).toContain(`--nice=${NICE_MAX}`);
  });

  it('refuses an instance type without a feature, naming it and the known ones', () => {
    const r = sbatchArgs(spec({ instanceTypes: ['big', 'm5.large'] }), cfg, { nice: 0, marker: 'm' });
    expect(r).toEqual({
      ok: false,
      reason:
        'instance_types: m5.large has no SLURM node feature in this cluster\'s "features" (known: gpu-a100, big, large)',
    });
    const none = sbatchArgs(spec({ instanceTypes: ['x'] }), parseSlurmConfig({}), { nice: 0, marker: 'm' });
    expect(none.ok).toBe(false);
    expect(!none.ok && none.reason).toMatch(/none configured/);
  });
});

describe('batchScript', () => {
  const script = batchScript({
    containerId: 'c-0000000000000001',
    nodeId: 'n-0000000000000001',
    secret: 'bs_AbC-d_9',
    apiUrl: "http://api:8470/it's",
    cfg: parseSlurmConfig({
      agent_command: ['/usr/bin/node', '/opt/berth/bin/berth.js'],
      work_dir: '/scratch/berth/',
    }),
    marker: 'berth:slurm/default',
  });

  it('execs the one-shot agent with the secret on stdin, never in its arguments', () => {
    const lines = script.split('\n');
    expect(lines[0]).toBe('#!/bin/sh');
    const exec = lines.find((l) => l.startsWith('exec '))!;
    expect(exec).toContain("'agent' '--once' 'c-0000000000000001'");
    expect(exec).toContain("'--work-dir' '/scratch/berth/c-0000000000000001'");
    expect(exec).toContain("'--bootstrap-secret-file' '-' <<'BERTH_BOOTSTRAP_SECRET'");
    expect(exec).not.toContain('bs_AbC');
    expect(lines.slice(lines.indexOf(exec) + 1)).toEqual(['bs_AbC-d_9', 'BERTH_BOOTSTRAP_SECRET', '']);
    expect(script).not.toContain('PATH');
  });

  it('is valid sh that hands the agent its arguments and the secret exactly', () => {
    // The script with the agent command replaced by a printer of its arguments and stdin.
    const probe = batchScript({
      containerId: 'c-0000000000000001',
      nodeId: 'n-1',
      secret: 'bs_secret',
      apiUrl: "http://h/it's a 'test'",
      cfg: parseSlurmConfig({
        agent_command: ['/bin/sh', '-c', 'printf "%s\\n" "$@"; cat', 'sh'],
      }),
      marker: 'm',
    });
    const out = execFileSync('/bin/sh', ['-s'], { input: probe, encoding: 'utf8' }).split('\n');
    expect(out).toContain("http://h/it's a 'test'");
    expect(out).toContain('--once');
    expect(out[out.length - 2]).toBe('bs_secret');
  });

  it('refuses a secret the here-document could not carry', () => {
    expect(() =>
      batchScript({
        containerId: 'c-1',
        nodeId: 'n-1',
        secret: 'bs_x\nBERTH_BOOTSTRAP_SECRET\nrm -rf /',
        apiUrl: 'http://h',
        cfg: parseSlurmConfig({}),
        marker: 'm',
      }),
    ).toThrow(/unexpected characters/);
  });

  it('shellQuote', () => {
    expect(shellQuote("a'b")).toBe(`'a'\\''b'`);
    expect(
      execFileSync('/bin/sh', ['-c', `printf %s ${shellQuote('$HOME `x` \'y\' "z"')}`], { encoding: 'utf8' }),
    ).toBe('$HOME `x` \'y\' "z"');
  });
});

describe('the job environment', () => {
  it('SLURM variables and agent_env only: nothing else of the dispatcher reaches a job', () => {
    const env = submitEnvironment(
      {
        SLURM_CONF: '/etc/slurm/x.conf',
        SBATCH_PARTITION: 'p',
        BERTH_DATABASE_URL: 'postgres://secret',
        BERTH_TOKEN: 'bt_x',
        PATH: '/home/me/bin',
        HOME: '/root',
      },
      { PATH: '/usr/bin:/bin', HTTPS_PROXY: 'http://proxy' },
    );
    expect(env).toEqual({
      SLURM_CONF: '/etc/slurm/x.conf',
      SBATCH_PARTITION: 'p',
      PATH: '/usr/bin:/bin',
      HTTPS_PROXY: 'http://proxy',
    });
  });
});

describe('sbatch failures', () => {
  it.each([
    // Real messages of SLURM 22.05 (seen on the test cluster).
    [
      'sbatch: error: Memory specification can not be satisfied\nsbatch: error: Batch job submission failed: Requested node configuration is not available\n',
      'perm',
      'Memory specification can not be satisfied; Batch job submission failed: Requested node configuration is not available',
    ],
    [
      'sbatch: error: CPU count per node can not be satisfied\n',
      'perm',
      'CPU count per node can not be satisfied',
    ],
    ['sbatch: error: Batch job submission failed: Invalid feature specification\n', 'perm', null],
    ['sbatch: error: Invalid generic resource (gres) specification\n', 'perm', null],
    ['sbatch: error: Batch job submission failed: Invalid partition name specified\n', 'perm', null],
    [
      'sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n',
      'temp',
      null,
    ],
    [
      "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)\n",
      'temp',
      null,
    ],
    ['', 'temp', 'sbatch failed without a message'],
  ])('%#: %s', (stderr, kind, message) => {
    const f = classifySbatchError(stderr);
    expect(f.kind).toBe(kind);
    if (message) expect(f.message).toBe(message);
  });

  it('job ids of --parsable', () => {
    expect(parseJobId('123\n')).toBe('123');
    expect(parseJobId('123;cluster2\n')).toBe('123');
    expect(parseJobId('Submitted batch job 123')).toBeNull();
    expect(parseJobId('')).toBeNull();
  });
});
