// Issue 10's done-when, as the issue ran it: on `berth up`, a user (a `user` token, the CLI) submits the
// escape with `berth submit --wait` while another user's container runs with a secret in its environment.
// Its output holds none of Berth's secrets (admin token, node tokens, bootstrap secrets) nor the other
// user's, and it wrote nothing outside its directory. Without an image (process runtime) and, where docker
// runs, with one.
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, onTestFinished } from 'vitest';
import { createRuntime } from '../../src/agent/runtimes/detect.js';
import { probeSandbox } from '../../src/agent/runtimes/sandbox.js';
import { freePort } from '../../src/store/embedded.js';
import { TEST_IMAGE, rootfsMissing } from '../agent/helpers.js';
import { assertBuilt, berth, berthDaemon, killProcessesMentioning, testHome, until } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

let home: string;
let env: NodeJS.ProcessEnv;
let listen: string;
let up: ReturnType<typeof berthDaemon> | null = null;

beforeAll(async () => {
  assertBuilt();
  ({ home, env } = testHome('berth-escape-up-'));
  listen = `127.0.0.1:${await freePort()}`;
});

afterAll(async () => {
  if (up) await up.stop('SIGINT');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

const sandbox = await probeSandbox();
const processMissing = typeof sandbox === 'string' ? sandbox : null;
const dockerMissing = (await createRuntime('docker').available()) ?? rootfsMissing();

const secret = (what: string) => `${what}-${randomBytes(12).toString('hex')}`;

/** The escape, widened: everything it manages to read goes to its output. */
const attack = (marker: string) => `
H=${home}
echo "== admin token"; cat $H/admin-token
echo "== node tokens"; cat $H/instances/*/work/node-token.json
echo "== bootstrap secrets"; cat $H/instances/*/bootstrap-secret
echo "== database password"; cat $H/*.password $H/pgdata*/*.password 2>&1 | head -3
echo "== environments"; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' <$f; done
echo "== other containers"; cat $H/instances/*/work/containers/*/run/stdout $H/instances/*/work/containers/*/run/scratch/*
for d in $H /tmp /etc /usr /; do echo pwned >$d/${marker} && echo "wrote $d"; done
echo "== attack done"
`;

/** What must never appear in the attacker's output: every secret file under BERTH_HOME, read on the host. */
function berthSecrets(): Record<string, string> {
  const out: Record<string, string> = {
    'admin token': readFileSync(join(home, 'admin-token'), 'utf8').trim(),
  };
  for (const id of readdirSync(join(home, 'instances'))) {
    const dir = join(home, 'instances', id);
    const token = join(dir, 'work', 'node-token.json');
    if (existsSync(token))
      out[`node token of ${id}`] = (JSON.parse(readFileSync(token, 'utf8')) as { token: string }).token;
    const boot = join(dir, 'bootstrap-secret');
    if (existsSync(boot)) out[`bootstrap secret of ${id}`] = readFileSync(boot, 'utf8').trim();
  }
  return out;
}

describe('the escape on berth up, run as a user (issue 10 done-when)', () => {
  const cases = [
    { name: 'process runtime (no image)', image: null, missing: processMissing },
    { name: 'docker runtime', image: TEST_IMAGE, missing: dockerMissing },
  ];
  for (const c of cases)
    itIf(c.missing)(c.name, { timeout: 240_000 }, async () => {
      if (!up) {
        up = berthDaemon(['up', '--listen', listen], env);
        await until(() => /Berth is up/.test(up!.output()), 120_000, 'berth up');
      }
      const admin = { ...env, BERTH_API_URL: `http://${listen}` };
      const tokenFor = (owner: string) =>
        berth(['token', 'create', '--scope', 'user', '--owner', owner], admin).stdout.trim();
      const alice = { ...admin, BERTH_TOKEN: tokenFor('alice') };
      const mallory = { ...admin, BERTH_TOKEN: tokenFor('mallory') };
      const image = c.image ? ['--image', c.image] : [];

      const victimEnv = secret('alice-env');
      const victimOut = secret('alice-out');
      const v = berth(
        [
          'submit',
          ...image,
          '--cpus',
          '0.25',
          '--ram',
          '128MiB',
          '--env',
          `ALICE_SECRET=${victimEnv}`,
          '--',
          'sh',
          '-c',
          `echo ${victimOut}; echo ${victimOut} >alice-file; sleep 200`,
        ],
        alice,
      );
      expect(v.code, v.stderr).toBe(0);
      const victim = v.stdout.trim().split('\n')[0]!;
      await until(
        () => berth(['logs', victim], alice).stdout.includes(victimOut),
        120_000,
        "alice's container running",
      );

      const marker = `berth-pwned-${randomBytes(6).toString('hex')}`;
      const targets = [home, '/tmp', '/etc', '/usr', '/'].map((d) => join(d, marker));
      onTestFinished(() => targets.forEach((f) => rmSync(f, { force: true }))); // even when it leaked
      const r = berth(
        ['submit', '--wait', ...image, '--cpus', '0.25', '--ram', '128MiB', '--', 'sh', '-c', attack(marker)],
        mallory,
      );
      const out = r.stdout + r.stderr;
      expect(out).toContain('== attack done'); // it ran to the end: the checks below mean something
      const leaks = { ...berthSecrets(), "alice's environment": victimEnv, "alice's output": victimOut };
      for (const [what, value] of Object.entries(leaks)) expect(out, `leaked ${what}`).not.toContain(value);
      expect(targets.filter(existsSync), 'files written on the host').toEqual([]);

      expect(berth(['cancel', victim], alice).code).toBe(0);
    });
});
