// The process runtime's sandbox (bubblewrap), against the real bwrap: what a container can see and touch
// on the host, which uid it runs as, where its environment travels, how signals reach it without a cgroup,
// and what happens when bwrap is missing.
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RuntimeTransientError } from '../../src/agent/runtimes/errors.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { descendants } from '../../src/agent/runtimes/procfs.js';
import { probeSandbox, sandboxUid } from '../../src/agent/runtimes/sandbox.js';
import { itIf } from '../helpers/needs.js';
import { sandboxCase } from './cases.js';
import {
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  isRoot,
  leftovers,
  spec,
  track,
  waitFor,
  waitForOutput,
} from './helpers.js';

const probed = await probeSandbox();
const missing = typeof probed === 'string' ? probed : null;
const rootMissing = missing ?? (isRoot ? null : 'not root: the sandbox uid needs root');
const sh = (script: string): string[] => ['/bin/sh', '-c', script];

const temp: string[] = [];
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-sbx-'));
  temp.push(d);
  return d;
}

afterEach(async () => {
  await cleanupHandles();
  const left = await leftovers();
  await cleanupWorkDirs();
  while (temp.length) await rm(temp.pop()!, { recursive: true, force: true });
  expect(left).toEqual([]);
});

describe('process runtime sandbox', () => {
  itIf(rootMissing)(
    'the container runs as its own uid, sees only its processes, a read-only system and no host secrets',
    async () => {
      const rt = new ProcessRuntime();
      const s = await spec(
        null,
        sh(
          [
            'echo "uid $(id -u) gid $(id -g)"',
            'echo "procs $(ls /proc | grep -c "^[0-9]")"',
            'echo "pid $$"',
            'cat /etc/shadow >/dev/null 2>&1 && echo "shadow readable" || echo "shadow hidden"',
            'for d in /root /home /var /run /opt /srv; do [ -e $d ] && echo "visible $d"; done',
            'echo x >/usr/berth-probe 2>/dev/null && echo "wrote /usr"',
            'echo x >/etc/berth-probe 2>/dev/null && echo "wrote /etc"',
            'echo x >/berth-probe 2>/dev/null && echo "wrote /"',
            'echo x >/tmp/private && echo "tmp ok"',
            'echo x >file && echo "cwd ok $(pwd)"',
            'echo "ifaces $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\\n" " ")"',
            'grep -E "^(CapEff|NoNewPrivs)" /proc/self/status',
          ].join('; '),
        ),
      );
      const h = track(await rt.start(s));
      const [out, info] = await Promise.all([collect(h), h.wait()]);
      expect(info.exitCode, out.stderr).toBe(0);
      const uid = sandboxUid(s.id);
      const scratch = join(s.workDir, 'scratch');
      expect(out.stdout).toContain(`uid ${uid} gid ${uid}\n`);
      // bwrap's init (pid 1), the shell (pid 2), and the commands of the substitution.
      expect(Number(/procs (\d+)/.exec(out.stdout)![1])).toBeLessThanOrEqual(5);
      expect(out.stdout).toContain('pid 2\n');
      expect(out.stdout).toContain('shadow hidden\n');
      expect(out.stdout).not.toMatch(/visible|wrote/);
      expect(out.stdout).toContain('tmp ok\n');
      expect(out.stdout).toContain(`cwd ok ${scratch}\n`);
      expect(out.stdout).toContain('ifaces lo \n');
      expect(out.stdout).toMatch(/CapEff:\s+0+\nNoNewPrivs:\s+1\n/);
      // On the host: the file belongs to the container's uid, in its work dir only; /tmp stayed private.
      const st = await stat(join(scratch, 'file'));
      expect(st.uid).toBe(uid);
      expect((await stat(scratch)).mode & 0o777).toBe(0o700);
      await expect(stat('/tmp/private')).rejects.toThrow(/ENOENT/);
    },
  );

  // Shared with the cgroup v2 guest (test/guest/): the same on cgroup v1 here.
  itIf(rootMissing)(sandboxCase.name, async () => {
    await sandboxCase.run(new ProcessRuntime(), null);
  });

  itIf(rootMissing)("the container's environment never appears on a host command line", async () => {
    const rt = new ProcessRuntime();
    const secret = `s3cret-${Math.random().toString(36).slice(2)}`;
    const s = await spec(null, sh('echo "ready $SECRET_VALUE"; sleep 30'), { env: { SECRET_VALUE: secret } });
    const h = track(await rt.start(s));
    await waitForOutput(h, `ready ${secret}`);
    const run = JSON.parse(await readFile(join(s.workDir, 'run.json'), 'utf8')) as { shim: { pid: number } };
    const pids = [run.shim.pid, ...(await descendants(run.shim.pid))];
    expect(pids.length).toBeGreaterThanOrEqual(4); // shim, bwrap, bwrap's init, the shell...
    for (const pid of pids) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      expect(cmdline, `pid ${pid}`).not.toContain(secret);
    }
    // The options file that carried it to bwrap is gone once bwrap had it open.
    expect(await readdir(s.workDir)).not.toContain('sandbox.args');
    await h.signal('SIGKILL');
    expect((await h.wait()).exitCode).toBe(137);
  });

  itIf(missing)(
    'without a cgroup, SIGTERM reaches the command (not the sandbox) and SIGKILL every descendant',
    async () => {
      const rt = new ProcessRuntime(await tempDir()); // no cgroup controllers there
      const s = await spec(
        null,
        sh(`sleep 60 & trap 'echo got-term' TERM; echo ready; while :; do sleep 0.1; done`),
      );
      const h = track(await rt.start(s));
      await waitForOutput(h, 'ready');
      const run = JSON.parse(await readFile(join(s.workDir, 'run.json'), 'utf8')) as {
        shim: { pid: number };
      };
      const inside = await descendants(run.shim.pid);
      await h.signal('SIGTERM');
      await waitForOutput(h, 'got-term');
      expect(await readFile(join(s.workDir, 'exit'), 'utf8').catch(() => null)).toBeNull(); // still running
      await h.signal('SIGKILL');
      expect((await h.wait()).exitCode).toBe(137);
      await waitFor(
        async () =>
          (
            await Promise.all(
              inside.map((pid) =>
                readFile(`/proc/${pid}/stat`, 'utf8').then(
                  (t) => t.slice(t.lastIndexOf(')') + 2, t.lastIndexOf(')') + 3) === 'Z',
                  () => true,
                ),
              ),
            )
          ).every(Boolean),
        5000,
        'every process of the container (the background sleep included) to be gone',
      );
    },
  );

  it('bwrap missing: image-less containers are refused with the reason, unless the sandbox is "none"', async () => {
    const rt = new ProcessRuntime(undefined, { bwrap: '/nonexistent/bwrap' });
    expect(await rt.available()).toMatch(
      /^bubblewrap not found \(\/nonexistent\/bwrap; apt-get install bubblewrap.*\); image-less containers are refused/,
    );
    const err = await rt.start(await spec(null, ['true'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RuntimeTransientError);
    expect((err as Error).message).toMatch(/bubblewrap not found/);

    const unsafe = new ProcessRuntime(await tempDir(), { bwrap: '/nonexistent/bwrap', sandbox: 'none' });
    expect(await unsafe.available()).toBeNull();
    const h = track(await unsafe.start(await spec(null, sh('echo "uid $(id -u)"'))));
    expect(h.warning).toMatch(/no sandbox \(configured "none"\): the container runs as a host process/);
    const [out, info] = await Promise.all([collect(h), h.wait()]);
    expect(info.exitCode).toBe(0);
    expect(out.stdout).toBe(`uid ${process.getuid?.()}\n`);
  });
});
