// Cases for the cgroup layer itself (cgroup.ts), below the runtimes: the version probe against the mount
// table, the pids limit, freezing a group, and memory peak without memory.peak. Run on this host by
// cgroup.test.ts and inside the cgroup v2 guest by test/guest/ (like cases.ts, with node:assert).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { CgroupV2, cgroupAt, probeCgroups, type Cgroup } from '../../src/agent/runtimes/cgroup.js';
import type { Measured } from './cases.js';
import { waitFor } from './helpers.js';

/** A cgroup case: throws when the cgroup layer is wrong on this host. */
export interface CgroupCase {
  name: string;
  /** The cgroup versions the case applies to (all when absent). */
  versions?: readonly (1 | 2)[];
  run(): Promise<Measured>;
}

const MiB = 1024 * 1024;

/** The version the mount table says, found independently of probeCgroups (which uses statfs). */
async function mountedVersion(): Promise<1 | 2 | null> {
  const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' '));
  if (mounts.some(([, dir, type]) => dir === '/sys/fs/cgroup' && type === 'cgroup2')) return 2;
  if (mounts.some(([, dir, type, opts]) => type === 'cgroup' && dir && opts?.split(',').includes('memory')))
    return 1;
  return null;
}

let seq = 0;
/** A fresh test group (berth/cgtest-*: no container id starts so) that `withGroup` removes. */
async function withGroup<T>(fn: (cg: Cgroup) => Promise<T>, opts = {}): Promise<T> {
  seq += 1;
  const host = await probeCgroups();
  const cg = cgroupAt(host, `berth/cgtest-${process.pid}-${seq}`, opts);
  try {
    return await fn(cg);
  } finally {
    await cg.killAll(5000);
    await cg.remove();
  }
}

/** Starts `script` in `cg` (the shell joins the group first, as the shim does). */
async function startIn(cg: Cgroup, script: string): Promise<ChildProcess> {
  const join = cg
    .procsFiles()
    .map((f) => `echo $$ > ${f}`)
    .join(' && ');
  const child = spawn('/bin/sh', ['-c', `${join} && ${script}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  await once(child, 'spawn');
  return child;
}

async function output(child: ChildProcess): Promise<{ code: number | null; out: string }> {
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, out };
}

export const probeCase: CgroupCase = {
  name: 'probes the cgroup version the mount table shows, and finds it usable',
  async run() {
    const host = await probeCgroups();
    assert.equal(host.version, await mountedVersion(), 'version');
    assert.equal(host.unusable, null, 'unusable');
    return { version: host.version ?? 0 };
  },
};

export const pidsCase: CgroupCase = {
  name: 'pids limit: a group of at most 8 processes cannot fork a ninth',
  run: () =>
    withGroup(async (cg) => {
      await cg.create({ vcpus: 1, ram: 64 * MiB, pids: 8 });
      // The shell itself is one; it tries 20 background sleeps and reports how many forks failed.
      const child = await startIn(
        cg,
        'ok=0; i=0; while [ $i -lt 20 ]; do if sleep 30 & then ok=$((ok+1)); fi; i=$((i+1)); done; echo "started $ok"',
      );
      const { out } = await output(child);
      const live = (await cg.pids()).length;
      assert.ok(live <= 8, `${live} processes in a group limited to 8`);
      assert.ok(live >= 2, `${live} processes: the limit let the first forks through`);
      assert.match(out, /fork|Resource temporarily unavailable|retry/i, 'a fork failed');
      return { live };
    }),
};

export const freezeGroupCase: CgroupCase = {
  name: 'freeze: a frozen group uses no CPU, is reported frozen, and a SIGKILL still ends it',
  run: () =>
    withGroup(async (cg) => {
      await cg.create({ vcpus: 1, ram: 64 * MiB });
      const child = await startIn(cg, 'while :; do :; done');
      const exited = once(child, 'exit');
      const cpu = async (): Promise<number> => (await cg.stats()).cpuSeconds;
      await waitFor(async () => (await cpu()) > 0.01, 20_000, 'the loop to use CPU');
      const t0 = performance.now();
      await cg.freeze();
      const freezeMs = performance.now() - t0;
      assert.equal(await cg.isFrozen(), true, 'isFrozen after freeze');
      const at = await cpu();
      await new Promise((r) => setTimeout(r, 300)); // watching for CPU that must not be used
      assert.equal(await cpu(), at, 'CPU used while frozen');
      await cg.thaw();
      assert.equal(await cg.isFrozen(), false, 'isFrozen after thaw');
      await waitFor(async () => (await cpu()) > at, 20_000, 'the thawed loop to use CPU');
      await cg.freeze();
      await cg.killAll(10_000);
      await exited;
      assert.deepEqual(await cg.pids(), [], 'processes left after killAll of a frozen group');
      return { freezeMs: +freezeMs.toFixed(2) };
    }),
};

export const peakFallbackCase: CgroupCase = {
  name: 'memory peak without memory.peak (kernels before 5.19): the highest memory.current sampled',
  versions: [2], // v1 keeps the peak in memory.max_usage_in_bytes on every kernel
  async run() {
    const host = await probeCgroups();
    return withGroup(async (cg) => {
      await cg.create({ vcpus: 1, ram: 256 * MiB });
      // dd holds its 64 MiB buffer while blocked writing into a pipe nobody reads, until sleep ends.
      const child = await startIn(cg, 'dd if=/dev/zero bs=64M count=1 2>/dev/null | sleep 2');
      const ended = output(child);
      let done = false;
      void ended.then(() => (done = true));
      const fallback = new CgroupV2(cg.path, host.root, { memoryPeak: false });
      while (!done) {
        await fallback.stats();
        await new Promise((r) => setTimeout(r, 20));
      }
      const peak = (await fallback.stats()).peakRamBytes;
      const real = (await cg.stats()).peakRamBytes;
      assert.ok(peak >= 48 * MiB, `sampled peak ${peak} >= 48 MiB (dd held 64 MiB for 2 s)`);
      assert.ok(peak <= real, `sampled peak ${peak} <= memory.peak ${real}`);
      return { sampledMiB: +(peak / MiB).toFixed(1), peakMiB: +(real / MiB).toFixed(1) };
    });
  },
};

/** The cases in the order they run. */
export const CGROUP_CASES: readonly CgroupCase[] = [probeCase, pidsCase, freezeGroupCase, peakFallbackCase];
