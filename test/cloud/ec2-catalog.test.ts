// `berth catalog ec2` (the real CLI from dist/) against the emulated EC2's DescribeInstanceTypes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { execFile } from 'node:child_process';
import { assertBuilt, BIN } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';
import { ec2World, noMoto, type Ec2World } from './ec2-helpers.js';

const it = itIf(noMoto);
let w: Ec2World;
const dir = mkdtempSync(join(tmpdir(), 'berth-catalog-'));
const env = { AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y', AWS_REGION: 'us-east-1' };

beforeAll(async () => {
  if (noMoto) return;
  assertBuilt();
  w = await ec2World();
});
afterAll(async () => {
  await w?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the CLI without blocking this process, whose event loop serves the emulator's proxy. */
function catalog(
  prices: unknown,
  ...extra: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  const file = join(dir, `prices-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, typeof prices === 'string' ? prices : JSON.stringify(prices));
  const args = [BIN, 'catalog', 'ec2', '--prices', file, '--endpoint', w.emu.endpoint, ...extra];
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      args,
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    ),
  );
}

describe('berth catalog ec2', () => {
  it('builds instance types from DescribeInstanceTypes and the price file, spot ones preemptible', async () => {
    const r = await catalog(
      { 't3.small': { on_demand: 0.0208, spot: 0.0067 }, 'g4dn.xlarge': 0.526, 'm5.large': { spot: 0.035 } },
      '--json',
      '--scratch',
      '20GiB',
    );
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { instance_types: Record<string, unknown>[] };
    expect(out.instance_types).toEqual([
      {
        name: 'g4dn.xlarge',
        provider_type: 'g4dn.xlarge',
        vcpus: 4,
        ram: '16GiB',
        scratch: '20GiB',
        gpus: 1,
        price: 0.526,
        preemptible: false,
      },
      {
        name: 'm5.large-spot',
        provider_type: 'm5.large',
        vcpus: 2,
        ram: '8GiB',
        scratch: '20GiB',
        gpus: 0,
        price: 0.035,
        preemptible: true,
      },
      {
        name: 't3.small',
        provider_type: 't3.small',
        vcpus: 2,
        ram: '2GiB',
        scratch: '20GiB',
        gpus: 0,
        price: 0.0208,
        preemptible: false,
      },
      {
        name: 't3.small-spot',
        provider_type: 't3.small',
        vcpus: 2,
        ram: '2GiB',
        scratch: '20GiB',
        gpus: 0,
        price: 0.0067,
        preemptible: true,
      },
    ]);
    // What it prints is a valid instance_types for an ec2 dispatch config.
    const d = parseDispatchConfig({ driver: 'ec2', ...out, ec2: { subnets: ['subnet-1'], ami: 'ami-1' } });
    expect(d.instanceTypes.map((t) => t.name)).toHaveLength(4);
    const table = await catalog({ 't3.small': 0.0208 });
    expect(table.stdout).toMatch(/^NAME\s+EC2 TYPE\s+VCPUS\s+RAM/);
    expect(table.stdout).toContain('t3.small');
  });

  it('names what is wrong in the price file, and a type EC2 does not offer', async () => {
    const bad = await catalog({ 't3.small': { on_demand: -1 } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('t3.small.on_demand: expected a price per hour >= 0');
    expect((await catalog('{oops')).stderr).toContain('--prices');
    expect((await catalog({ small: 1 })).stderr).toContain('"small": expected an EC2 instance type');
    const unknown = await catalog({ 'zz9.huge': 1 });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('EC2 does not offer zz9.huge');
  });
});
