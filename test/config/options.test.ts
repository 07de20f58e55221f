// The process options: one declaration gives each option its default, config-file key, environment
// variable and flag; the layers merge in that order, and every error names the key, where the value came
// from and what was expected.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main, buildProgram } from '../../src/cli/main.js';
import { ConfigError, loadConfig, PROCESS_OPTIONS } from '../../src/config/options.js';

let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'berth-options-'));
});
afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  rmSync(home, { recursive: true, force: true });
});

const LEVELS = 'fatal, error, warn, info, debug, trace, silent';

/** The message loading the options fails with. */
function errorOf(flags: Record<string, unknown>, env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(flags, { BERTH_HOME: home, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('loaded without error');
}

function writeConfig(value: unknown): string {
  const file = join(home, 'config.json');
  writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value));
  return file;
}

describe('loadConfig', () => {
  it('is complete with nothing set: every option has its declared default', () => {
    const c = loadConfig({}, { BERTH_HOME: home });
    expect(c).toEqual({
      home,
      database_url: null,
      listen: '127.0.0.1:8470',
      api_url: null,
      backend: null,
      token: null,
      log_level: 'warn',
      max_dispatch_attempts: 10,
      body_limit: 1024 ** 2,
      dispatch_config: null,
      cloud: 'local',
      node_id: null,
      once: null,
      bootstrap_secret_file: null,
      work_dir: null,
      runtime: 'auto',
      kill_grace: 30_000,
      ping_wait: 10_000,
      imds_url: null,
      notice_poll: 5_000,
      process_sandbox: 'bwrap',
      bwrap: 'bwrap',
      process_criu: null,
      runc_criu: null,
      vm_guest: null,
      vm_accel: 'tcg',
      cgroup_parent: 'berth',
      container_network: 'none',
      log_limit: 64 * 1024 ** 2,
      pressure_interval: 50,
      pressure_headroom: 64 * 1024 ** 2,
      pressure_margin: 32 * 1024 ** 2,
      pressure_psi: null,
      pressure_cpu: null,
      checkpoint_limit: 256 * 1024 ** 2,
      checkpoint_wait: 5_000,
      instance_ram: null,
      instance_vcpus: null,
    });
    expect(Object.keys(c).sort()).toEqual(PROCESS_OPTIONS.options.map((o) => o.key).sort());
  });

  it('layers the config file, then the environment, then flags over the defaults', () => {
    writeConfig({ listen: '127.0.0.1:1', log_level: 'info', body_limit: '2MiB', kill_grace: 5 });
    const env = { BERTH_HOME: home };
    expect(loadConfig({}, env)).toMatchObject({
      listen: '127.0.0.1:1',
      log_level: 'info',
      body_limit: 2 * 1024 ** 2,
      kill_grace: 5000,
    });
    const env2 = {
      ...env,
      BERTH_LISTEN: '127.0.0.1:2',
      BERTH_MAX_DISPATCH_ATTEMPTS: '7',
      BERTH_LOG_LEVEL: '',
    };
    expect(loadConfig({}, env2)).toMatchObject({
      listen: '127.0.0.1:2',
      log_level: 'info', // an empty variable is unset
      max_dispatch_attempts: 7,
    });
    expect(loadConfig({ listen: '127.0.0.1:3', ping_wait: '1m' }, env2)).toMatchObject({
      listen: '127.0.0.1:3',
      ping_wait: 60_000,
    });
  });

  it('reads the file named by BERTH_CONFIG instead of the one in home', () => {
    writeConfig({ listen: '127.0.0.1:1' });
    const other = join(home, 'other.json');
    writeFileSync(other, JSON.stringify({ listen: '127.0.0.1:9' }));
    expect(loadConfig({}, { BERTH_HOME: home, BERTH_CONFIG: other }).listen).toBe('127.0.0.1:9');
  });

  it('a config file error names the file and the key, and what was expected', () => {
    let file = writeConfig({ max_dispatch_attempts: 0 });
    expect(errorOf({}, {})).toBe(`${file}: max_dispatch_attempts: expected a whole number >= 1, got 0`);
    file = writeConfig({ colour: 'red' });
    expect(errorOf({}, {})).toBe(`${file}: colour: unknown field`);
    file = writeConfig({ home: '/elsewhere' });
    expect(errorOf({}, {})).toBe(`${file}: home: not allowed in a config file`);
    file = writeConfig({ max_dispatch_attempts: '10' }); // JSON numbers are numbers
    expect(errorOf({}, {})).toBe(`${file}: max_dispatch_attempts: expected a whole number >= 1, got "10"`);
    file = writeConfig('{ not json');
    expect(errorOf({}, {})).toMatch(new RegExp(`^${file}: not valid JSON`));
    file = writeConfig([1]);
    expect(errorOf({}, {})).toBe(`${file}: expected a JSON object of options`);
  });

  it('an environment error names the variable and the key', () => {
    expect(errorOf({}, { BERTH_LOG_LEVEL: 'loud' })).toBe(
      `log_level (from $BERTH_LOG_LEVEL): expected one of ${LEVELS}, got "loud"`,
    );
    expect(errorOf({}, { BERTH_MAX_DISPATCH_ATTEMPTS: 'ten' })).toBe(
      'max_dispatch_attempts (from $BERTH_MAX_DISPATCH_ATTEMPTS): expected a whole number >= 1, got "ten"',
    );
    expect(errorOf({}, { BERTH_DATABASE_URL: 'http://x' })).toBe(
      'database_url (from $BERTH_DATABASE_URL): expected a URL such as postgres://berth@db.example/berth, got "http://x"',
    );
  });

  it("the agent's cgroup parent: a path below the cgroup root, nothing that leaves it", () => {
    const env = { BERTH_HOME: home, BERTH_CGROUP_PARENT: 'berth-local/local-1/containers' };
    expect(loadConfig({}, env).cgroup_parent).toBe('berth-local/local-1/containers');
    const what =
      'expected a cgroup path below the hierarchy root: names of letters, digits, "_", "-" and "." separated by "/"';
    for (const bad of ['/berth', 'berth/', 'a/../b', '..', 'a//b', 'a b'])
      expect(errorOf({ cgroup_parent: bad }, {})).toBe(
        `cgroup_parent (from --cgroup-parent): ${what}, got ${JSON.stringify(bad)}`,
      );
  });

  it('a flag error names the flag and the key', () => {
    expect(errorOf({ body_limit: '4 gigs' }, {})).toBe(
      'body_limit (from --body-limit): expected a size such as 4GiB, 512MiB or a number of bytes, got "4 gigs"',
    );
    expect(errorOf({ ping_wait: '61s' }, {})).toBe(
      'ping_wait (from --ping-wait): expected a duration of at most 60s, got "61s"',
    );
    expect(errorOf({ notice_poll: '10ms' }, {})).toBe(
      'notice_poll (from --notice-poll): expected a duration of at least 100ms, got "10ms"',
    );
    expect(errorOf({ imds_url: 'http://x/$(id)' }, {})).toBe(
      'imds_url (from --imds-url): expected an http base URL such as http://169.254.169.254, got "http://x/$(id)"',
    );
    expect(errorOf({ cloud: 'aws' }, {})).toBe(
      'cloud (from --cloud): expected one of local, ec2-emulated, got "aws"',
    );
    expect(errorOf({ listen: 'nowhere' }, {})).toBe(
      'listen (from --listen): expected HOST:PORT such as 127.0.0.1:8470, got "nowhere"',
    );
    expect(errorOf({ api_url: 'ftp://x' }, {})).toBe(
      'api_url (from --api-url): expected a URL such as http://127.0.0.1:8470, got "ftp://x"',
    );
  });

  it("the agent's sandbox and output options: values, and errors naming the key and what was expected", () => {
    const env = {
      BERTH_PROCESS_SANDBOX: 'none',
      BERTH_LOG_LIMIT: '0',
      BERTH_BWRAP: '/opt/bw/bwrap',
      BERTH_PROCESS_CRIU: 'criu',
      BERTH_RUNC_CRIU: '/usr/sbin/criu',
    };
    expect(loadConfig({ container_network: 'host' }, { BERTH_HOME: home, ...env })).toMatchObject({
      process_sandbox: 'none',
      bwrap: '/opt/bw/bwrap',
      process_criu: 'criu',
      runc_criu: '/usr/sbin/criu',
      container_network: 'host',
      log_limit: 0, // no limit
    });
    expect(loadConfig({ log_limit: '64KiB' }, { BERTH_HOME: home }).log_limit).toBe(64 * 1024);
    expect(errorOf({ log_limit: '1KiB' }, {})).toBe(
      'log_limit (from --log-limit): expected 0 (no limit) or a size of at least 64KiB, got "1KiB"',
    );
    expect(errorOf({}, { BERTH_PROCESS_SANDBOX: 'maybe' })).toBe(
      'process_sandbox (from $BERTH_PROCESS_SANDBOX): expected one of bwrap, none, got "maybe"',
    );
    expect(errorOf({ container_network: 'bridge' }, {})).toBe(
      'container_network (from --container-network): expected one of none, host, got "bridge"',
    );
    expect(errorOf({ bwrap: 'bin/bwrap' }, {})).toBe(
      'bwrap (from --bwrap): expected a program name or an absolute path, got "bin/bwrap"',
    );
    expect(errorOf({ process_criu: 'sbin/criu' }, {})).toBe(
      'process_criu (from --process-criu): expected a program name or an absolute path, got "sbin/criu"',
    );
    expect(errorOf({}, { BERTH_RUNC_CRIU: './criu' })).toBe(
      'runc_criu (from $BERTH_RUNC_CRIU): expected a program name or an absolute path, got "./criu"',
    );
  });
});

describe('the CLI flags come from the declarations', () => {
  it('every command of a process has the flag of every option the process reads', () => {
    const program = buildProgram();
    const flagsOf = (name: string) =>
      program.commands.find((c) => c.name() === name)!.options.map((o) => o.long);
    const globals = program.options.map((o) => o.long);
    let checked = 0;
    for (const o of PROCESS_OPTIONS.options) {
      if (!o.flag) continue;
      if (o.global) {
        expect(globals, o.key).toContain(o.flag);
        checked++;
        continue;
      }
      for (const p of o.usedBy ?? []) {
        expect(flagsOf(p), `${o.key} on ${p}`).toContain(o.flag);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(20);
    for (const cmd of ['server', 'dispatch', 'up', 'agent']) expect(flagsOf(cmd)).toContain('--log-level');
  });

  /** Runs the CLI in-process; returns the exit code and what it wrote to stderr. */
  async function berth(...args: string[]): Promise<{ code: number; stderr: string }> {
    let stderr = '';
    vi.spyOn(console, 'error').mockImplementation((...parts: unknown[]) => {
      stderr += parts.join(' ') + '\n';
    });
    const code = await main(['node', 'berth', '--home', home, ...args]);
    return { code, stderr };
  }

  it('a bad flag, variable or file value stops a command with the key named, before it starts anything', async () => {
    let r = await berth('server', '--log-level', 'loud');
    expect(r).toEqual({
      code: 2,
      stderr: `berth: configuration: log_level (from --log-level): expected one of ${LEVELS}, got "loud"\n`,
    });
    vi.stubEnv('BERTH_KILL_GRACE', 'soon');
    r = await berth('agent', '--node-id', 'n1', '--work-dir', home, '--api-url', 'http://127.0.0.1:9');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^berth: configuration: kill_grace \(from \$BERTH_KILL_GRACE\): expected a duration/,
    );
    vi.unstubAllEnvs();
    const file = writeConfig({ listen: 8470 });
    r = await berth('up');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `berth: configuration: ${file}: listen: expected HOST:PORT such as 127.0.0.1:8470, got 8470\n`,
    );
  });

  it('an option a process cannot run without says how to set it', async () => {
    const r = await berth('agent', '--work-dir', home, '--api-url', 'http://127.0.0.1:9');
    expect(r).toEqual({
      code: 2,
      stderr: 'berth: configuration: node_id: required: set --node-id or $BERTH_NODE_ID\n',
    });
  });
});
