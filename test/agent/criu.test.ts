// CRIU detection (src/agent/runtimes/criu.ts) against stand-in `criu` executables, and the real one.
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  awaitRestore,
  criuDump,
  criuRestore,
  criuUnusable,
  type RestoreWait,
} from '../../src/agent/runtimes/criu.js';

let dir = '';
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function script(name: string, body: string): Promise<string> {
  dir ||= await mkdtemp(join(tmpdir(), 'berth-criu-'));
  const f = join(dir, name);
  await writeFile(f, `#!/bin/sh\n${body}\n`);
  await chmod(f, 0o755);
  return f;
}

describe('criuUnusable', () => {
  it('is null when `criu check` passes, and names the first error line when it fails', async () => {
    expect(await criuUnusable(await script('ok', 'echo "Looks good."; exit 0'))).toBeNull();
    const bad = await script(
      'bad',
      'echo "Error (criu/kerndat.c:1615): kerndat_vdso_fill_symtable failed" >&2; echo second >&2; exit 1',
    );
    expect(await criuUnusable(bad)).toBe(
      'criu check failed: Error (criu/kerndat.c:1615): kerndat_vdso_fill_symtable failed',
    );
    expect(await criuUnusable(join(tmpdir(), 'no-such-criu-here'))).toMatch(/not found$/);
  });

  it('answers for the real criu of this host (a reason or null, never a throw)', async () => {
    const r = await criuUnusable();
    expect(r === null || /^criu (check failed|not found)/.test(r)).toBe(true);
  });
});

describe('criuDump and criuRestore (stand-in criu; the real one runs in the guest: test/guest/criu-case.ts)', () => {
  it("fail naming criu's first error line from its log, and pass the images dir and log file", async () => {
    // Writes its log where --images-dir and --log-file say, as criu does, then fails.
    const failing = await script(
      'fails',
      'while [ $# -gt 0 ]; do case $1 in --images-dir) d=$2;; --log-file) l=$2;; esac; shift; done\n' +
        'printf "(00.01) note\\nError (criu/cr-dump.c:2): Dumping FAILED.\\nError (x): later\\n" > "$d/$l"; exit 1',
    );
    const images = join(dir, 'images');
    await mkdir(images);
    await expect(criuDump(123, images, { criu: failing })).rejects.toThrow(
      'criu dump failed: Error (criu/cr-dump.c:2): Dumping FAILED.',
    );
    await expect(criuRestore(images, { criu: failing })).rejects.toThrow(
      'criu restore failed: Error (criu/cr-dump.c:2): Dumping FAILED.',
    );
    const ok = await script(
      'ok-restore',
      'while [ $# -gt 0 ]; do case $1 in --pidfile) p=$2;; esac; shift; done; echo 4242 > "$p"',
    );
    expect(await criuRestore(images, { criu: ok })).toBe(4242);
  });

  it("gives criu's collection of the tree (its --timeout, 10 s unless told) the dump's own deadline", async () => {
    const args = join(dir, 'dump-args');
    const recording = await script('records', `echo "$@" > '${args}'`);
    const images = await mkdtemp(join(dir, 'images-'));
    await criuDump(123, images, { criu: recording, timeoutMs: 45_500 });
    expect(await readFile(args, 'utf8')).toMatch(/ --timeout 46\n$/);
    await criuDump(123, images, { criu: recording });
    expect(await readFile(args, 'utf8')).toMatch(/ --timeout 60\n$/);
  });
});

describe('awaitRestore (the wait of both runtimes: runc.ts, process-criu.ts)', () => {
  /** A work dir holding `files`, and the wait for it (the restore's log `log` inside it). */
  const waitIn = async (files: Record<string, string>, w: Partial<RestoreWait> = {}) => {
    dir ||= await mkdtemp(join(tmpdir(), 'berth-criu-'));
    const work = await mkdtemp(join(dir, 'work-'));
    for (const [f, text] of Object.entries(files)) await writeFile(join(work, f), text);
    const wait: RestoreWait = {
      pidFile: 'restored.pid',
      log: join(work, 'restore.log'),
      prefix: 'x restore failed',
      deadline: Date.now() + 60_000,
      timeoutMs: 60_000,
      explain: () => null,
      ...w,
    };
    return {
      work,
      done: () =>
        awaitRestore(work, wait).then(
          () => 'restored',
          (e: Error) => e.message,
        ),
    };
  };

  it('resolves once the pid file is there (even if the restored tree already ended)', async () => {
    expect(await (await waitIn({ 'restored.pid': '42\n', exit: '0\n' })).done()).toBe('restored');
    // Written while it waits.
    const w = await waitIn({});
    const done = w.done();
    await writeFile(join(w.work, 'restored.pid'), '42\n');
    expect(await done).toBe('restored');
  });

  it('fails when the restore ended first: the reason explain() finds, else the last line of stderr or log', async () => {
    const explain = ({ log, stderr, ended }: { log: string; stderr: string; ended: boolean }) =>
      `${ended} [${log}] [${stderr}]`;
    expect(await (await waitIn({ exit: '1\n', 'restore.log': 'L', stderr: 'E' }, { explain })).done()).toBe(
      'x restore failed: true [L] [E]',
    );
    expect(
      await (await waitIn({ exit: '3\n', 'restore.log': 'a\nlog end\n', stderr: 'b\nerr end\n' })).done(),
    ).toBe('x restore failed: ended (exit 3) without restoring: err end');
    expect(await (await waitIn({ exit: '3\n', 'restore.log': 'a\nlog end\n' })).done()).toBe(
      'x restore failed: ended (exit 3) without restoring: log end',
    );
    expect(await (await waitIn({ exit: '3\n' })).done()).toBe(
      'x restore failed: ended (exit 3) without restoring: no log',
    );
  });

  it('fails when the deadline passed, naming the timeout (explain() may still say why)', async () => {
    const late = { deadline: Date.now() - 1, timeoutMs: 1234 };
    expect(await (await waitIn({}, late)).done()).toBe('x restore failed: not done in 1234 ms');
    const explain = ({ ended }: { ended: boolean }) => `ended ${ended}`;
    expect(await (await waitIn({}, { ...late, explain })).done()).toBe('x restore failed: ended false');
  });
});
