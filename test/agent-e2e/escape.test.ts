// Issue 10 item 1, the escape, with each runtime: a user's container, run by a real `berth agent` process
// whose instance lives in a BERTH_HOME laid out as `berth up` lays it out, tries to read Berth's secrets
// (the admin token, the node token, the bootstrap secret, the journal, the agent's environment), another
// user's container (its environment, its output, its files), and to write outside its own directory
// (BERTH_HOME, the host's /tmp, /etc, /usr, the agent's work dir, the other container's directory).
// Nothing secret may appear in its output and no file may appear on the host.
import { existsSync } from 'node:fs';
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, onTestFinished } from 'vitest';
import { createRuntime, type RuntimeName } from '../../src/agent/runtimes/detect.js';
import { probeSandbox } from '../../src/agent/runtimes/sandbox.js';
import { itIf } from '../helpers/needs.js';
import { TEST_IMAGE, TEST_ROOTFS_TAR, rootfsMissing } from '../agent/helpers.js';
import { Harness, until } from './harness.js';

const ids: string[] = [];
const h = Harness.forFile(ids);

const sandbox = await probeSandbox();
const cases: { name: RuntimeName; image: string | null; missing: string | null }[] = [
  { name: 'process', image: null, missing: typeof sandbox === 'string' ? sandbox : null },
  { name: 'runc', image: TEST_ROOTFS_TAR, missing: null },
  { name: 'docker', image: TEST_IMAGE, missing: null },
  { name: 'podman', image: TEST_ROOTFS_TAR, missing: null },
];
for (const c of cases)
  if (c.name !== 'process') c.missing = (await createRuntime(c.name).available()) ?? rootfsMissing();

const secret = (what: string) => `${what}-${randomBytes(12).toString('hex')}`;

/** The attack, in POSIX sh (busybox in the images): everything it manages to read goes to its output. */
function attack(p: { home: string; work: string; victim: string; marker: string }): string {
  return `
H=${p.home}; W=${p.work}; V=${p.victim}
echo "== admin token"; cat $H/admin-token
echo "== node token"; cat $W/node-token.json $H/instances/*/work/node-token.json
echo "== bootstrap secret"; cat $H/instances/*/bootstrap-secret
echo "== journal"; cat $W/journal.json
echo "== environments"; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' <$f; done
echo "== command lines"; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done
echo "== other container"; ls -la $W/containers; cat $W/containers/*/run/stdout $V/victim-file
echo "== shadow"; cat /etc/shadow
echo "== search"; find / -maxdepth 8 \\( -name node-token.json -o -name admin-token -o -name bootstrap-secret \\) 2>/dev/null
for f in $H/${p.marker} /tmp/${p.marker} /etc/${p.marker} /usr/${p.marker} /${p.marker} $W/${p.marker} $V/${p.marker}; do
  echo pwned >$f && echo "wrote $f"
done
echo "== attack done"
`;
}

describe('the escape (issue 10 item 1): a user container reads nothing of Berth and writes nowhere else', () => {
  for (const c of cases) {
    itIf(c.missing)(
      `${c.name} runtime`,
      async () => {
        // BERTH_HOME as `berth up` has it: the admin token, the instance's secret and its agent's work dir.
        const home = await h.tempDir('berth-escape-home-');
        const adminToken = secret('admin');
        await writeFile(join(home, 'admin-token'), adminToken, { mode: 0o600 });
        const instanceId = `local-escape-${c.name}-${randomBytes(3).toString('hex')}`;
        const node = await h.node(instanceId, join(home, 'instances', instanceId));
        const agentEnvSecret = secret('agent-env');
        const agent = h.spawnAgent(node, ['--runtime', c.name], h.url, {
          ...process.env,
          BERTH_HOME: home,
          BERTH_TOKEN: agentEnvSecret, // as if the operator had exported it where `berth up` ran
        });
        // Even when an assertion fails: no agent, container, cgroup or mount of this test is left.
        const started: string[] = [];
        onTestFinished(async () => {
          if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
          await agent.exited;
          const rt = createRuntime(c.name);
          for (const id of started)
            await rt.discard(id, join(node.workDir, 'containers', id, 'run')).catch(() => {});
        });

        // Another user's container, running, with a secret in its environment, its output and its files.
        const victimEnv = secret('victim-env');
        const victimOut = secret('victim-out');
        const victimFile = secret('victim-file');
        const victim = await h.submitAndAssign(node, {
          ...(c.image ? { image: c.image } : {}),
          command: ['sh', '-c', `echo ${victimOut}; echo ${victimFile} >victim-file; sleep 120`],
          env: { VICTIM_SECRET: victimEnv },
        });
        ids.push(victim);
        started.push(victim);
        await h.waitState(victim, ['Running'], 60_000);
        await until(async () => (await h.text(victim, 'stdout')).includes(victimOut), 30_000, 'victim up');
        const victimScratch = join(node.workDir, 'containers', victim, 'run', 'scratch');

        const marker = `berth-pwned-${randomBytes(6).toString('hex')}`;
        const attacker = await h.submit({
          ...(c.image ? { image: c.image } : {}),
          command: ['sh', '-c', attack({ home, work: node.workDir, victim: victimScratch, marker })],
        });
        ids.push(attacker);
        started.push(attacker);
        await h.assign(attacker, node);
        const done = await h.waitState(attacker, ['Complete', 'Cancelled'], 90_000);
        const out = (await h.logs(attacker))
          .filter((l) => l.stream !== 'system')
          .map((l) => l.data)
          .join('');
        expect(done.state, out).toBe('Complete');
        expect(out).toContain('== attack done'); // it did run to the end: the checks below mean something

        const nodeToken = (
          JSON.parse(await readFile(join(node.workDir, 'node-token.json'), 'utf8')) as {
            token: string;
          }
        ).token;
        const leaks = {
          'admin token': adminToken,
          'node token': nodeToken,
          'bootstrap secret': node.secret,
          "the agent's environment": agentEnvSecret,
          "the other container's environment": victimEnv,
          "the other container's output": victimOut,
          "the other container's file": victimFile,
          'the lock token in the journal': '"lockToken"',
        };
        for (const [what, value] of Object.entries(leaks)) expect(out, `leaked ${what}`).not.toContain(value);
        // The agent's state is its own: 0700 directories, 0600 secrets.
        const mode = async (p: string) => ((await stat(p)).mode & 0o777).toString(8);
        expect(await mode(node.workDir)).toBe('700');
        expect(await mode(join(node.workDir, 'containers'))).toBe('700');
        expect(await mode(join(node.workDir, 'node-token.json'))).toBe('600');
        expect(await mode(join(node.workDir, 'journal.json'))).toBe('600');

        const targets = [home, '/tmp', '/etc', '/usr', '/', node.workDir, victimScratch].map((d) =>
          join(d, marker),
        );
        const written = targets.filter((f) => existsSync(f));
        for (const f of written) await rm(f, { force: true });
        expect(written, 'files written on the host').toEqual([]);

        await h.store.containers.cancel(victim, { kind: 'user', owner: null }, 'user', 'test done');
        await until(
          () => !existsSync(join(node.workDir, 'containers', victim)),
          60_000,
          'the victim to be stopped and removed',
        );
      },
      240_000,
    );
  }
});
