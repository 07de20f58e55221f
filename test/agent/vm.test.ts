// The vm runtime (src/agent/runtimes/vm.ts) against the whole runtime conformance suite, each container in
// its own QEMU guest booted from the CI's `test` guest image (.ci/setup.d/40-guest.sh builds it), plus the
// checkpoint/restore case: a counter saved to a file mid-run, its QEMU ended, resumed in another work dir
// (another instance's), where it counts on from where it stood and exits with its own exit code.
import { existsSync, mkdtempSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createRuntime, DETECT_ORDER } from '../../src/agent/runtimes/detect.js';
import {
  guestReportedExit,
  machineRecord,
  pruneTemplates,
  TEMPLATES_KEPT,
  VmRuntime,
} from '../../src/agent/runtimes/vm.js';
import { findGuest } from '../helpers/guest.js';
import { itIf } from '../helpers/needs.js';
import { runtimeConformance } from './conformance.js';
import {
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  isRoot,
  leftovers,
  makeWorkDir,
  recordIn,
  spec,
  track,
  waitFor,
} from './helpers.js';

// Every start boots a guest under software emulation: seconds, tens of seconds on a loaded host.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 120_000 });

const guest = findGuest('test');
const missing =
  typeof guest === 'string' ? guest : isRoot ? null : 'not root: the QEMU process joins a cgroup';
// The saved guests every start restores (one per machine shape), this file's own: removed at the end.
const templateDir = mkdtempSync(join(tmpdir(), 'berth-vm-templates-'));
afterAll(() => rm(templateDir, { recursive: true, force: true }));
const options = { templateDir, ...(typeof guest === 'string' ? {} : { guestDir: guest.dir }) };
const runtime = new VmRuntime(options);
const MiB = 1024 * 1024;

runtimeConformance(
  runtime,
  null,
  missing,
  { ended: (_id, workDir) => guestReportedExit(workDir) },
  // The suite's deadlines count from start() returning, as for the other runtimes, but two of them span a
  // start (the "agent" starting two containers: the first start of a machine shape boots a guest).
  { timeScale: 10, runtimeOptions: { vm: options } },
);

describe('vm runtime refusals', () => {
  it('is not usable without its guest image, and says which file is missing', async () => {
    const rt = createRuntime('vm', { vm: { guestDir: '/nonexistent/guest' } });
    expect(rt.name).toBe('vm');
    expect(await rt.available()).toBe(
      'no guest image: /nonexistent/guest/vmlinuz missing (build it with scripts/guest/build.sh test, or set vm_guest)',
    );
    const s = await spec(null, ['true']);
    await expect(rt.start(s)).rejects.toThrow('vm: no guest image: /nonexistent/guest/vmlinuz missing');
    await cleanupWorkDirs();
  });

  it('refuses GPUs naming the field, before anything starts', async () => {
    const s = await spec(null, ['true'], { gpus: 1 });
    await expect(runtime.start(s)).rejects.toThrow('gpus: the vm runtime cannot assign GPUs, got 1');
    await cleanupWorkDirs();
  });

  itIf(typeof guest === 'string' ? guest : null)(
    'refuses to resume a checkpoint it cannot (not a vm one, a bad shape, not the shape its request makes, another guest build), naming why, starting nothing',
    async () => {
      const s = await spec(null, ['true'], { ram: 64 * MiB });
      const { workDir } = s;
      const ckpt = await makeWorkDir();
      await expect(runtime.wholeState.restore(s, ckpt)).rejects.toThrow(
        'checkpoint: machine.json missing (not a vm checkpoint)',
      );
      const shape = { memoryMiB: 224, cpus: 1, accel: 'tcg', build: '0123456789abcdef' };
      await writeFile(join(ckpt, 'machine.json'), JSON.stringify({ ...shape, cpus: 0 }));
      await expect(runtime.wholeState.restore(s, ckpt)).rejects.toThrow(
        'checkpoint: machine.json cpus: expected an integer 1..1024, got 0',
      );
      await writeFile(join(ckpt, 'machine.json'), JSON.stringify({ ...shape, accel: 'hvf' }));
      await expect(runtime.wholeState.restore(s, ckpt)).rejects.toThrow(
        'checkpoint: machine.json accel: expected tcg or kvm, got "hvf"',
      );
      await writeFile(join(ckpt, 'machine.json'), JSON.stringify(shape));
      // The attempt asks for more memory than the saved guest has (its request grew): started afresh.
      await expect(runtime.wholeState.restore({ ...s, ram: 128 * MiB }, ckpt)).rejects.toThrow(
        "checkpoint: saved as a guest of 224 MiB and 1 CPUs, this attempt's request makes one of 288 MiB and 1 CPUs",
      );
      await expect(runtime.wholeState.restore(s, ckpt)).rejects.toThrow(
        /^checkpoint: a guest of build 0123456789abcdef cannot resume on this instance's guest image \(build [0-9a-f]{16}\)$/,
      );
      expect(existsSync(join(workDir, 'run.json'))).toBe(false);
      await cleanupWorkDirs();
    },
  );

  it("reads a checkpoint's machine.json with the runtimes' shared reader, naming the field that is wrong", async () => {
    const temp: string[] = [];
    const recordOf = (text: string | null) => recordIn(machineRecord, 'machine.json', text, temp);
    try {
      const good = { memoryMiB: 224, cpus: 1, accel: 'tcg', build: '0123456789abcdef' };
      expect(await recordOf(JSON.stringify(good))).toEqual(good);
      expect(await recordOf(null)).toBe('checkpoint: machine.json missing (not a vm checkpoint)');
      expect(await recordOf('{')).toBe('checkpoint: machine.json: expected JSON');
      // Not an object: every field is missing, the first one checked is named.
      expect(await recordOf('null')).toBe(
        'checkpoint: machine.json accel: expected tcg or kvm, got undefined',
      );
      expect(await recordOf(JSON.stringify({ ...good, build: 'abc' }))).toBe(
        'checkpoint: machine.json build: expected the guest build\'s digest, got "abc"',
      );
      expect(await recordOf(JSON.stringify({ ...good, memoryMiB: 1.5 }))).toBe(
        'checkpoint: machine.json memoryMiB: expected an integer 1..1048576, got 1.5',
      );
      expect(await recordOf(JSON.stringify({ ...good, cpus: 1025 }))).toBe(
        'checkpoint: machine.json cpus: expected an integer 1..1024, got 1025',
      );
    } finally {
      for (const d of temp) await rm(d, { recursive: true, force: true });
    }
  });

  it('prunes its saved templates: unused for a week, beyond the most recently used, half-made ones left by a dead process', async () => {
    const root = await makeWorkDir();
    const now = Date.UTC(2026, 0, 10);
    const hour = 3600 * 1000;
    const at = async (name: string, ms: number) => {
      await mkdir(join(root, name));
      await utimes(join(root, name), new Date(ms), new Date(ms));
    };
    // t0 the most recently used .. t9 the least; old unused for 8 days; the one just made is kept anyway.
    for (let i = 0; i < 10; i++) await at(`224m-1c-t${i}`, now - (i + 1) * hour);
    await at('224m-1c-old', now - 8 * 24 * hour);
    await at('.build-dead', now - 2 * hour);
    await at('.build-live', now - 60_000);
    const removed = await pruneTemplates(root, now, join(root, '224m-1c-t9'));
    expect(removed.sort()).toEqual(['.build-dead', '224m-1c-old', '224m-1c-t8'].sort());
    expect((await readdir(root)).sort()).toEqual(
      ['.build-live', ...Array.from({ length: 8 }, (_, i) => `224m-1c-t${i}`), '224m-1c-t9'].sort(),
    );
    expect(TEMPLATES_KEPT).toBe(8);
    await cleanupWorkDirs();
  });

  it('is never chosen by auto-detection', () => {
    expect(DETECT_ORDER).not.toContain('vm');
  });
});

describe('vm runtime checkpoint', () => {
  afterEach(async () => {
    await cleanupHandles();
    const left = await leftovers();
    await cleanupWorkDirs();
    expect(left, 'cgroups left behind').toEqual([]);
  });

  itIf(missing)(
    'a running counter saved to a file, its QEMU ended, restored in another work dir: it counts on and exits with its code',
    async () => {
      const N = 40;
      const counter = `i=0; while [ $i -lt ${N} ]; do i=$((i+1)); echo $i; sleep 0.1; done; exit 5`;
      const a = await spec(null, ['/bin/sh', '-c', counter], { ram: 64 * MiB });
      const ha = track(await runtime.start(a));
      const printed = async (dir: string): Promise<string> =>
        readFile(join(dir, 'stdout'), 'utf8').catch(() => '');
      await waitFor(async () => (await printed(a.workDir)).split('\n').length > 5, 120_000, 'the counter');
      const ckpt = join(await makeWorkDir(), 'checkpoint');
      const saved = await ha.checkpoint(ckpt);
      const endA = await ha.wait();
      expect(endA.exitCode).toBeNull();
      expect(endA.reason).toBe(`checkpointed to ${ckpt}`);
      const before = await printed(a.workDir);

      // "Another instance": a new work dir, the checkpoint moved there as a directory.
      const b = await makeWorkDir();
      const t0 = performance.now();
      const hb = track(await runtime.restore({ ...a, workDir: b }, ckpt));
      const restoreMs = performance.now() - t0;
      const [out, info] = await Promise.all([collect(hb), hb.wait()]);
      expect(info.exitCode).toBe(5);
      expect(info.oomKilled).toBe(false);
      // Not restarted, nothing lost or repeated: what was printed before the save and after the restore
      // together are 1..N once each, and both parts hold numbers.
      const want = Array.from({ length: N }, (_, k) => `${k + 1}\n`).join('');
      expect(before + out.stdout).toBe(want);
      expect(before.length).toBeGreaterThan(0);
      expect(out.stdout.length).toBeGreaterThan(0);
      expect(out.stdout.startsWith('1\n')).toBe(false);
      console.log(
        `vm checkpoint (tcg, ${64 + 160} MiB guest): save ${saved.ms.toFixed(0)} ms, ` +
          `${(saved.bytes / MiB).toFixed(1)} MiB; restore until running ${restoreMs.toFixed(0)} ms; ` +
          `counter stopped after ${before.trim().split('\n').pop()}`,
      );
    },
  );
});
