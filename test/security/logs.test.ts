// No secret is ever written to a log (DESIGN §4): a whole `berth up` logging at `debug`, a user
// token made and containers submitted through the real CLI; then every log of the run (the server's
// output, each instance's agent log, every log file under BERTH_HOME, the CLI's output other than the one
// answer that creates a token), and the admin's API answers about requests, containers, nodes, instances
// and tokens and /metrics, is searched for every secret of the run: the admin token, the user token, each
// node token, each bootstrap secret and each per-lock token.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, withDatabase } from '../../src/store/db.js';
import { runningEmbeddedUrl } from '../../src/store/embedded.js';
import { lockToken } from '../../src/store/secrets.js';
import { assertBuilt, berth, berthDaemon, readIfExists, until } from '../helpers/cli.js';

let home: string;
let env: NodeJS.ProcessEnv;
const daemons: ReturnType<typeof berthDaemon>[] = [];

function leftovers(): string[] {
  try {
    return execFileSync('pgrep', ['-af', home], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.includes('pgrep'));
  } catch {
    return [];
  }
}

/** Every file under `dir` whose name says it is a log (x.log, log/..., *.log.N), with its text. */
function logFiles(dir: string, out = new Map<string, string>()): Map<string, string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    let st;
    try {
      st = statSync(p);
    } catch {
      continue; // removed while we looked
    }
    if (st.isDirectory()) logFiles(p, out);
    else if (
      st.isFile() &&
      (/\.log(\.\d+)?$|^log$|\.out$|\.err$/.test(name) || /\/(log|logs|pg_log)\//.test(p))
    )
      out.set(p, readFileSync(p, 'utf8'));
  }
  return out;
}

beforeAll(() => {
  assertBuilt();
  home = mkdtempSync(join(tmpdir(), 'berth-sec-logs-'));
  chmodSync(home, 0o711);
  env = {
    BERTH_HOME: home,
    BERTH_DATABASE_URL: '',
    BERTH_API_URL: '',
    BERTH_TOKEN: '',
    BERTH_LOG_LEVEL: 'debug',
  };
});

afterAll(async () => {
  for (const d of daemons) await d.stop('SIGKILL');
  for (const line of leftovers()) {
    try {
      process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  rmSync(home, { recursive: true, force: true });
});

describe('secrets in logs', () => {
  it(
    'a full `berth up` run at log level debug writes no secret to any log',
    { timeout: 240_000 },
    async () => {
      writeFileSync(
        join(home, 'dispatch.json'),
        JSON.stringify({
          cluster: 'sec',
          instance_types: [{ name: 'small', vcpus: 1, ram: '1GiB', price: 0.05 }],
          // Instances stay up until Ctrl-C, so that their directories (secrets, agent logs) can be read.
          scheduler: { idle_timeout: '10m', max_instances: 2 },
          boot_delay: '200ms',
          tick_interval: '500ms',
          sync_interval: '1s',
        }),
      );
      const up = berthDaemon(['up', '--listen', '127.0.0.1:0', '--config', join(home, 'dispatch.json')], env);
      daemons.push(up);
      const url = (await until(() => readIfExists(join(home, 'api-url')), 60_000, 'the server')).trim();
      await until(() => /Berth is up/.test(up.output()), 60_000, '`berth up` to be ready');
      const admin = readFileSync(join(home, 'admin-token'), 'utf8').trim();

      // Through the CLI: a user token, then containers submitted with it.
      const cliOutput: string[] = [];
      const made = berth(['token', 'create', '--scope', 'user', '--owner', 'carol', '--json'], env);
      expect(made.code, made.stderr).toBe(0);
      const userToken = (JSON.parse(made.stdout) as { token: string }).token;
      expect(userToken).toMatch(/^bt_/);
      cliOutput.push(made.stderr); // its stdout is the one answer allowed to hold the token
      const asCarol = { ...env, BERTH_TOKEN: userToken };
      for (let i = 0; i < 3; i++) {
        const r = berth(
          [
            'submit',
            '--cpus',
            '0.25',
            '--ram',
            '64MiB',
            '--name',
            `sec-${i}`,
            '--',
            'sh',
            '-c',
            `echo out ${i}; sleep 1`,
          ],
          asCarol,
        );
        expect(r.code, r.stderr).toBe(0);
        cliOutput.push(r.stdout, r.stderr);
      }
      const waited = berth(
        ['submit', '--cpus', '0.25', '--ram', '64MiB', '--name', 'sec-w', '--wait', '--', 'echo', 'waited'],
        asCarol,
      );
      expect(waited.code, waited.stderr).toBe(0);
      expect(waited.stdout).toMatch(/waited/);
      cliOutput.push(waited.stdout, waited.stderr);

      const api = async <T>(path: string): Promise<T> => {
        const r = await fetch(`${url.replace(/\/$/, '')}${path}`, {
          headers: { authorization: `Bearer ${admin}` },
        });
        expect(r.status, path).toBe(200);
        return (await r.json()) as T;
      };
      await until(
        async () =>
          (await api<{ items: unknown[] }>('/v1/requests?name=sec-&state=Final&limit=100')).items.length ===
          4,
        120_000,
        'the 4 requests to finish',
      );
      for (const args of [['ps'], ['ps', '--all'], ['logs', 'sec-w']]) {
        const r = berth(args, asCarol);
        cliOutput.push(r.stdout, r.stderr);
      }
      const adminCli = berth(['instances'], env);
      cliOutput.push(adminCli.stdout, adminCli.stderr);
      // Nor in API answers other than the ones that create a secret, nor in the metrics (DESIGN §4).
      const answers = new Map<string, string>();
      for (const path of [
        '/v1/requests?limit=100',
        '/v1/containers?limit=100',
        '/v1/nodes',
        '/v1/instances',
        '/v1/tokens',
      ]) {
        const text = JSON.stringify(await api<unknown>(path));
        answers.set(`GET ${path}`, text);
        if (path.startsWith('/v1/containers'))
          for (const c of (JSON.parse(text) as { items: { id: string }[] }).items)
            for (const sub of ['', '/events', '/logs'])
              answers.set(
                `GET /v1/containers/${c.id}${sub}`,
                JSON.stringify(await api<unknown>(`/v1/containers/${c.id}${sub}`)),
              );
      }
      const metrics = await fetch(`${url.replace(/\/$/, '')}/metrics`);
      answers.set('GET /metrics', await metrics.text());

      // The secrets of this run.
      const instancesDir = join(home, 'instances');
      const instanceIds = readdirSync(instancesDir);
      expect(instanceIds.length).toBeGreaterThan(0);
      const bootstrapSecrets = instanceIds
        .map((id) => readIfExists(join(instancesDir, id, 'bootstrap-secret'))?.trim())
        .filter((s): s is string => !!s);
      const nodeTokens = instanceIds
        .map((id) => readIfExists(join(instancesDir, id, 'work', 'node-token.json')))
        .filter((s): s is string => !!s)
        .map((s) => (JSON.parse(s) as { token: string }).token);
      expect(bootstrapSecrets.length).toBe(instanceIds.length);
      expect(nodeTokens.length).toBe(instanceIds.length);
      const dbUrl = runningEmbeddedUrl(join(home, 'pgdata'));
      expect(dbUrl).not.toBeNull();
      const pool = createPool(withDatabase(dbUrl!, 'berth'), 1);
      const lockTokens: string[] = [];
      try {
        const key = (await pool.query<{ value: string }>(`SELECT value FROM settings WHERE key = 'lock_key'`))
          .rows[0]!.value;
        const rows = (
          await pool.query<{ id: string; lock_generation: number }>(
            `SELECT id, lock_generation FROM containers`,
          )
        ).rows;
        expect(rows.length).toBe(4);
        for (const r of rows)
          for (let g = 0; g <= r.lock_generation; g++)
            lockTokens.push(lockToken(Buffer.from(key, 'hex'), r.id, g));
      } finally {
        await pool.end();
      }
      const secrets: [string, string][] = [
        ['admin token', admin],
        ['user token', userToken],
        ...nodeTokens.map((s) => ['node token', s] as [string, string]),
        ...bootstrapSecrets.map((s) => ['bootstrap secret', s] as [string, string]),
        ...lockTokens.map((s) => ['per-lock token', s] as [string, string]),
      ];
      for (const [, s] of secrets) expect(s.length).toBeGreaterThanOrEqual(20);

      // Logs while the instances exist (stopping removes their directories, agent logs included) ...
      const logs = logFiles(home);
      const agentLogs = [...logs.keys()].filter((p) => p.endsWith('agent.log'));
      expect(agentLogs.length).toBe(instanceIds.length);
      for (const p of agentLogs) expect(logs.get(p)!, p).toMatch(/registered/);
      // ... and after Ctrl-C, everything the run printed and whatever log files remain.
      expect(await up.stop('SIGINT')).toBe(0);
      for (const [p, text] of logFiles(home)) logs.set(p, (logs.get(p) ?? '') + text);
      logs.set('berth up output', up.output());
      cliOutput.forEach((text, i) => logs.set(`CLI output ${i}`, text));
      for (const [what, text] of answers) logs.set(what, text);
      // Everything really was logged: the configuration (with the secrets it holds redacted), one line
      // per request (agents' pings among them), the dispatcher's actions.
      expect(up.output()).toMatch(/"msg":"configuration"/);
      expect(up.output()).toMatch(/"msg":"request"/);
      expect(up.output()).toMatch(/"path":"\/v1\/nodes\/[^"]+\/ping"/);
      expect(up.output()).toMatch(/"msg":"container placed"/);

      const leaks: string[] = [];
      for (const [where, text] of logs)
        for (const [what, s] of secrets) if (text.includes(s)) leaks.push(`${what} in ${where}`);
      expect(leaks).toEqual([]);
      expect(existsSync(join(home, 'admin-token'))).toBe(true);
      expect(leftovers()).toEqual([]);
    },
  );
});
