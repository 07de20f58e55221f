// The ec2 driver's parts that need no EC2: its config section, the boot script (run for real with stub
// `berth` and `npm` programs), error classification, quota groups, the emulator's fault documents and
// its IMDSv2 endpoint with the agent's client.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ImdsClient } from '../../src/agent/imds.js';
import { amiFor, parseEc2Config } from '../../src/cloud/ec2/config.js';
import { classifyEc2Error, statedVcpuLimit } from '../../src/cloud/ec2/errors.js';
import { quotaGroup } from '../../src/cloud/ec2/quota-groups.js';
import { userDataScript } from '../../src/cloud/ec2/user-data.js';
import { Faults, parseFaultConfig } from '../../src/cloud/ec2-emu/faults.js';
import { EmulatedImds } from '../../src/cloud/ec2-emu/imds.js';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { ec2type } from './ec2-helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'berth-ec2-unit-'));
  dirs.push(d);
  return d;
};
const base = { subnets: ['subnet-0a'], ami: 'ami-0abc' };

describe('ec2 config', () => {
  it('defaults', () => {
    const c = parseEc2Config(base);
    expect(c).toMatchObject({
      subnets: ['subnet-0a'],
      ami: 'ami-0abc',
      rootVolumeBytes: 20 * 1024 ** 3,
      volumeType: 'gp3',
      encryptedVolumes: true,
      agentInstall: { kind: 'preinstalled', command: 'berth' },
      workDir: '/var/lib/berth',
      imdsUrl: 'http://169.254.169.254',
      createAttempts: 3,
      pageSize: 1000,
    });
  });

  it.each([
    [{ ...base, subnets: [] }, 'ec2.subnets: expected at least one id such as "subnet-0abc"'],
    [{ ...base, subnets: ['sub-1'] }, 'ec2.subnets[0]: expected an id such as "subnet-0abc", got "sub-1"'],
    [{ ...base, subnets: ['subnet-1', 'subnet-1'] }, 'ec2.subnets: expected distinct ids'],
    [{ ...base, ami: 'image-1' }, 'ec2.ami: expected an AMI id such as "ami-0abc", got "image-1"'],
    [{ ...base, ami_by_type: { gpu: 'x' } }, 'ec2.ami_by_type.gpu: expected an AMI id'],
    [{ ...base, tags: { 'berth-x': 'y' } }, 'ec2.tags.berth-x: the berth- and aws: prefixes are reserved'],
    [{ ...base, root_volume: '10 gigs' }, 'ec2.root_volume: expected a size'],
    [{ ...base, root_volume: '512MiB' }, 'ec2.root_volume: expected a size of at least 1GiB'],
    [{ ...base, page_size: 2 }, 'ec2.page_size: expected a whole number from 5 to 1000'],
    [{ ...base, agent_install: { pip: 'x' } }, 'ec2.agent_install: unknown source "pip"'],
    [{ ...base, agent_install: { npm: 'berth; rm -rf /' } }, 'ec2.agent_install.npm: expected a string'],
    [
      { ...base, agent_install: { tarball: 'ftp://x' } },
      'ec2.agent_install.tarball: expected an http(s) URL',
    ],
    [
      { ...base, imds_url: 'http://x/$(id)' },
      'ec2.imds_url: expected an http(s) URL without quotes, spaces or $',
    ],
    [{ ...base, spot_max_price: 0 }, 'ec2.spot_max_price: expected a price per hour above 0'],
    [{ ...base, subnet: ['subnet-1'] }, 'ec2.subnet: unknown field'],
  ])('refuses %j naming the key', (value, message) => {
    expect(() => parseEc2Config(value)).toThrow(message);
  });

  it('the AMI of a type: by name, then provider type, then the global one', () => {
    const c = parseEc2Config({ ...base, ami_by_type: { gpu: 'ami-0gpu', 'g5.xlarge': 'ami-0g5' } });
    expect(amiFor(c, { name: 'gpu', providerType: 'g4dn.xlarge' })).toBe('ami-0gpu');
    expect(amiFor(c, { name: 'other', providerType: 'g5.xlarge' })).toBe('ami-0g5');
    expect(amiFor(c, { name: 'small', providerType: 't3.small' })).toBe('ami-0abc');
  });

  it('the dispatch config takes driver "ec2" with its section, and names what is missing', () => {
    const types = [{ name: 'small', provider_type: 't3.small', vcpus: 2, ram: '2GiB', price: 0.02 }];
    const d = parseDispatchConfig({ driver: 'ec2', instance_types: types, ec2: base });
    expect(d.driver).toBe('ec2');
    expect(d.ec2?.subnets).toEqual(['subnet-0a']);
    expect(() => parseDispatchConfig({ driver: 'ec2', ec2: base })).toThrow(
      'instance_types: required with the ec2 driver',
    );
    expect(() =>
      parseDispatchConfig({ driver: 'ec2', instance_types: types, ec2: { subnets: ['subnet-1'] } }),
    ).toThrow('ec2.ami: required (type small has no ec2.ami_by_type entry)');
    expect(() => parseDispatchConfig({ driver: 'local', ec2: base })).toThrow(
      'ec2: only used with "driver": "ec2"',
    );
    expect(() => parseDispatchConfig({ driver: 'gce' })).toThrow(
      'driver: expected one of local, ec2, got "gce"',
    );
    expect(parseDispatchConfig({}).ec2).toBeNull();
  });
});

describe('ec2 boot script (user data)', () => {
  const boot = {
    api_url: 'http://10.0.0.5:8470',
    node_id: 'n-0123456789abcdef',
    bootstrap_secret: "s3cr'et",
    instance_type: 's',
  };

  /** A stub program that records its arguments, one per line, in `file`. */
  function stub(path: string, file: string, extra = '') {
    writeFileSync(path, `#!/bin/sh\nprintf '%s\\n' "$@" > ${file}\n${extra}exit 0\n`);
    chmodSync(path, 0o755);
  }

  function runScript(script: string, bin: string, work: string) {
    const file = join(work, '..', 'user-data');
    writeFileSync(file, script, { mode: 0o700 });
    return spawnSync(file, [], {
      encoding: 'utf8',
      env: {
        PATH: `${bin}:/usr/bin:/bin`,
        BERTH_WORK_DIR: work,
        BERTH_IMDS_URL: 'http://127.0.0.1:9',
        BERTH_AGENT_FOREGROUND: '1',
      },
    });
  }

  it('is valid bash that stores the secret (0600) and starts the preinstalled agent with the boot data', () => {
    const d = tmp();
    const bin = join(d, 'bin');
    execFileSync('mkdir', ['-p', bin, join(d, 'work')]);
    stub(join(bin, 'berth'), join(d, 'args'));
    const cfg = parseEc2Config({ ...base, agent_args: ['--runtime', 'docker'] });
    const script = userDataScript(cfg, ec2type('small', 't3.small'), boot);
    execFileSync('bash', ['-n'], { input: script });
    const r = runScript(script, bin, join(d, 'work'));
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(d, 'args'), 'utf8').trim().split('\n')).toEqual([
      'agent',
      '--api-url',
      'http://10.0.0.5:8470',
      '--node-id',
      'n-0123456789abcdef',
      '--runtime',
      'docker',
      '--bootstrap-secret-file',
      join(d, 'work', 'bootstrap-secret'),
      '--work-dir',
      join(d, 'work'),
      '--imds-url',
      'http://127.0.0.1:9',
    ]);
    expect(readFileSync(join(d, 'work', 'bootstrap-secret'), 'utf8')).toBe("s3cr'et");
    expect(statSync(join(d, 'work', 'bootstrap-secret')).mode & 0o777).toBe(0o600);
    expect(r.stdout).toContain('agent exited 0: not restarting');
  });

  it('installs the agent with npm from a package spec or a tarball URL', () => {
    for (const install of [{ npm: 'berth@0.1.0' }, { tarball: 'https://example.invalid/berth-0.1.0.tgz' }]) {
      const d = tmp();
      const bin = join(d, 'bin');
      execFileSync('mkdir', ['-p', bin, join(d, 'work')]);
      // `npm install` puts `berth` on the PATH.
      stub(
        join(bin, 'npm'),
        join(d, 'npm-args'),
        `cat > ${bin}/berth <<'EOF'\n#!/bin/sh\nprintf '%s\\n' "$@" > ${d}/args\nEOF\nchmod +x ${bin}/berth\n`,
      );
      const script = userDataScript(
        parseEc2Config({ ...base, agent_install: install }),
        ec2type('s', 't3.small'),
        boot,
      );
      const r = runScript(script, bin, join(d, 'work'));
      expect(r.status, r.stderr).toBe(0);
      expect(readFileSync(join(d, 'npm-args'), 'utf8').trim().split('\n')).toEqual([
        'install',
        '--global',
        '--no-audit',
        '--no-fund',
        Object.values(install)[0],
      ]);
      expect(readFileSync(join(d, 'args'), 'utf8').split('\n')[0]).toBe('agent');
    }
  });

  it('fails clearly when the agent is not installed', () => {
    const d = tmp();
    execFileSync('mkdir', ['-p', join(d, 'bin'), join(d, 'work')]);
    const script = userDataScript(parseEc2Config(base), ec2type('s', 't3.small'), boot);
    const r = runScript(script, join(d, 'bin'), join(d, 'work'));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('berth: not found (agent_install in the ec2 config');
  });
});

describe('EC2 error classification and quota groups', () => {
  const sdk = (name: string, status?: number, message = 'm') =>
    Object.assign(new Error(message), { name, ...(status ? { $metadata: { httpStatusCode: status } } : {}) });
  it.each([
    ['InsufficientInstanceCapacity', 500, 'capacity'],
    ['Unsupported', 400, 'capacity'],
    ['InstanceLimitExceeded', 400, 'quota'],
    ['VcpuLimitExceeded', 400, 'quota'],
    ['MaxSpotInstanceCountExceeded', 400, 'quota'],
    ['RequestLimitExceeded', 503, 'throttle'],
    ['InvalidInstanceID.NotFound', 400, 'not-found'],
    ['AuthFailure', 401, 'access'],
    ['UnauthorizedOperation', 403, 'access'],
    ['InternalError', 500, 'transient'],
    ['InvalidAMIID.NotFound', 400, 'invalid'],
    ['SomethingNew', 503, 'transient'],
  ])('%s (HTTP %i) is %s', (code, status, kind) => {
    expect(classifyEc2Error(sdk(code, status)).kind).toBe(kind);
  });

  it('no answer: transient; a timeout or a cut connection leaves the outcome unknown', () => {
    expect(classifyEc2Error(sdk('TimeoutError'))).toMatchObject({ kind: 'transient', outcomeUnknown: true });
    expect(
      classifyEc2Error(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })),
    ).toMatchObject({
      kind: 'transient',
      outcomeUnknown: true,
    });
    expect(
      classifyEc2Error(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })),
    ).toMatchObject({
      kind: 'transient',
      outcomeUnknown: false,
    });
  });

  it('the vCPU limit EC2 states', () => {
    expect(statedVcpuLimit('… than your current vCPU limit of 32 allows for …')).toBe(32);
    expect(statedVcpuLimit('no number')).toBeUndefined();
  });

  it.each([
    ['m5.large', false, 'on-demand/standard'],
    ['t3.small', true, 'spot/standard'],
    ['g4dn.xlarge', false, 'on-demand/g-vt'],
    ['vt1.3xlarge', true, 'spot/g-vt'],
    ['p4d.24xlarge', false, 'on-demand/p'],
    ['inf2.xlarge', false, 'on-demand/inf'],
    ['x2idn.16xlarge', false, 'on-demand/x'],
    ['u-6tb1.metal', false, 'on-demand/high-memory'],
    ['c7gn.large', false, 'on-demand/standard'],
  ])('%s (spot %s) is in quota group %s', (type, isSpot, group) => {
    expect(quotaGroup(type, isSpot)).toBe(group);
  });
});

describe('emulator fault documents', () => {
  it.each([
    [{ rules: [{ error: 'Nope' }] }, 'faults.rules[0].error: expected "lost-response" or one of'],
    [{ rules: [{ error: 'InternalError', probability: 2 }] }, 'faults.rules[0].probability'],
    [{ rules: [{ error: 'InternalError', when: 1 }] }, 'faults.rules[0].when: unknown key'],
    [{ latency: 'soon' }, 'faults.latency: expected a duration'],
    [{ throttle: { rate: 0 } }, 'faults.throttle.rate: expected calls per second above 0'],
    [{ limits: { max_vcpus: { standard: 4 } } }, 'faults.limits.max_vcpus.standard: expected a quota group'],
    [{ limits: { max_instances: -1 } }, 'faults.limits.max_instances: expected a whole number'],
  ])('refuses %j', (doc, message) => {
    expect(() => parseFaultConfig(doc)).toThrow(message);
  });

  it('the same document and calls give the same faults (seeded), and `times` bounds a rule', () => {
    const doc = {
      seed: 7,
      latency: '50ms',
      latency_jitter: '20ms',
      rules: [
        { action: 'RunInstances', error: 'InsufficientInstanceCapacity', probability: 0.5 },
        { action: 'TerminateInstances', error: 'InternalError', times: 2 },
      ],
    };
    const run = () => {
      const f = new Faults(parseFaultConfig(doc));
      const out: string[] = [];
      for (let i = 0; i < 40; i++) {
        const d = f.decide(i % 2 ? 'RunInstances' : 'TerminateInstances', new URLSearchParams(), 0);
        out.push(`${f.latency()}:${d.kind === 'error' ? d.code : d.kind}`);
      }
      return out;
    };
    const a = run();
    expect(run()).toEqual(a);
    const capacity = a.filter((x) => x.endsWith('InsufficientInstanceCapacity')).length;
    expect(capacity).toBeGreaterThan(3);
    expect(capacity).toBeLessThan(17);
    expect(a.filter((x) => x.endsWith('InternalError'))).toHaveLength(2);
    expect(a.every((x) => Number(x.split(':')[0]) >= 50 && Number(x.split(':')[0]) <= 70)).toBe(true);
  });

  it('rules match the instance type, subnet and purchase option of RunInstances', () => {
    const f = new Faults(
      parseFaultConfig({
        rules: [{ error: 'Unsupported', instance_type: 'g5.xlarge', subnet: 'subnet-b', market: 'spot' }],
      }),
    );
    const p = (o: Record<string, string>) => new URLSearchParams(o);
    const spotG5 = {
      InstanceType: 'g5.xlarge',
      SubnetId: 'subnet-b',
      'InstanceMarketOptions.MarketType': 'spot',
    };
    expect(f.decide('RunInstances', p(spotG5), 0)).toMatchObject({
      kind: 'error',
      code: 'Unsupported',
      status: 400,
    });
    expect(f.decide('RunInstances', p({ ...spotG5, SubnetId: 'subnet-a' }), 0).kind).toBe('pass');
    expect(f.decide('RunInstances', p({ InstanceType: 'g5.xlarge', SubnetId: 'subnet-b' }), 0).kind).toBe(
      'pass',
    );
  });
});

describe('emulated IMDSv2 and the agent client', () => {
  it('needs a session token; serves identity; notices are 404 until announced', async () => {
    const imds = new EmulatedImds({
      instanceId: 'i-0abc',
      instanceType: 't3.small',
      availabilityZone: 'us-east-1b',
      lifecycle: 'spot',
      userData: '#!/bin/bash\n',
    });
    const url = await imds.start('127.0.0.1');
    try {
      // IMDSv1 (no token) is refused, as on an instance with HttpTokens=required.
      const v1 = await fetch(`${url}/latest/meta-data/instance-id`);
      expect(v1.status).toBe(401);
      expect((await fetch(`${url}/latest/api/token`, { method: 'PUT' })).status).toBe(400);
      const c = new ImdsClient(url);
      expect(await c.instanceId()).toBe('i-0abc');
      expect(await c.get('/latest/meta-data/placement/availability-zone')).toBe('us-east-1b');
      expect(await c.spotAction()).toBeNull();
      expect(await c.rebalanceRecommendation()).toBeNull();
      imds.announceInterruption(new Date('2026-01-01T00:02:00Z'));
      expect(await c.spotAction()).toEqual({ action: 'terminate', time: new Date('2026-01-01T00:02:00Z') });
      imds.recommendRebalance(new Date('2026-01-01T00:00:30Z'));
      expect(await c.rebalanceRecommendation()).toEqual(new Date('2026-01-01T00:00:30Z'));
    } finally {
      await imds.stop();
    }
  });
});
