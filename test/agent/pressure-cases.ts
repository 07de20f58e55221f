// The pressure watcher (src/agent/pressure.ts) on a real cgroup, whichever version the kernel has: its
// sampler's file-cache subtraction, and the watcher itself (watchPressure, as the agent starts it) freezing
// an opportunistic container of the process runtime while a guaranteed one grows into the memory it
// borrowed. Written once, run in two places, like cases.ts and cgroup-cases.ts: on this (cgroup v1) host by
// pressure.test.ts, and inside the cgroup v2 guest by test/guest/ (node:assert; deadlines × TIME_SCALE).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  cgroupSampler,
  decidePressure,
  enclosingLimits,
  readPsi,
  watchPressure,
  type WatchedRunner,
} from '../../src/agent/pressure.js';
import { cgroupAt, probeCgroups, type Cgroup } from '../../src/agent/runtimes/cgroup.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import type { ExitInfo, RunHandle } from '../../src/agent/runtimes/types.js';
import { TIME_SCALE } from './cases.js';
import type { CgroupCase } from './cgroup-cases.js';
import { spec, track, waitFor } from './helpers.js';

const MiB = 1024 * 1024;
const ms = (n: number): number => n * TIME_SCALE;
const sh = (script: string): string[] => ['/bin/sh', '-c', script];
const toMiB = (b: number): number => +(b / MiB).toFixed(1);

/** A fresh top-level group (no container id starts so), removed with everything in it whatever happens. */
async function withTopGroup<T>(prefix: string, fn: (cg: Cgroup) => Promise<T>): Promise<T> {
  const cg = cgroupAt(await probeCgroups(), `${prefix}-${process.pid}-${randomBytes(3).toString('hex')}`);
  try {
    return await fn(cg);
  } finally {
    await cg.killAll(ms(5000)).catch(() => {});
    await cg.remove(ms(5000));
  }
}

export const fileCacheCase: CgroupCase = {
  name: 'the pressure sampler counts what the containers use, not the file cache a process that wrote a file left charged to the group',
  async run() {
    const host = await probeCgroups();
    // On disk, not tmpfs: tmpfs pages are memory the group cannot drop, and count.
    const dir = await mkdtemp(join('/var/tmp', 'berth-cache-'));
    try {
      return await withTopGroup('berth-cache', async (group) => {
        await group.create({ vcpus: 1, ram: 256 * MiB });
        // A process of the group writes 192 MiB to a file and exits: nothing of it runs any more.
        const joinGroup = group
          .procsFiles()
          .map((f) => `echo $$ > ${f}`)
          .join('; ');
        await promisify(execFile)('sh', [
          '-c',
          `${joinGroup}; exec dd if=/dev/zero of=${dir}/f bs=1M count=192 status=none`,
        ]);
        const st = await group.stats();
        assert.ok(st.ramBytes > 160 * MiB, `the cache is charged to the group: ${toMiB(st.ramBytes)} MiB`);
        // Sane: a part of what is charged, and most of it here (the writer is gone, its pages untouched since).
        assert.ok(
          st.inactiveFileBytes <= st.ramBytes,
          `inactive file ${toMiB(st.inactiveFileBytes)} MiB <= charged ${toMiB(st.ramBytes)} MiB`,
        );
        assert.ok(
          st.inactiveFileBytes > 128 * MiB,
          `inactive file ${toMiB(st.inactiveFileBytes)} MiB > 128 MiB of a 192 MiB file`,
        );
        const sample = await cgroupSampler(group, host.root, false)();
        assert.ok(sample.ramBytes < 32 * MiB, `sampled use ${toMiB(sample.ramBytes)} MiB < 32 MiB`);
        assert.equal(
          decidePressure(sample, { capacityBytes: 256 * MiB, headroomBytes: 64 * MiB, psiPercent: null }),
          null,
          'no pressure from file cache',
        );
        return {
          chargedMiB: toMiB(st.ramBytes),
          inactiveFileMiB: toMiB(st.inactiveFileBytes),
          sampledMiB: toMiB(sample.ramBytes),
        };
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
};

export const enclosingCase: CgroupCase = {
  name: 'the pressure sampler counts what the agent beside the containers uses inside the instance slice that limits both',
  async run() {
    const host = await probeCgroups();
    return withTopGroup('berth-slice', async (slice) => {
      // An instance's slice as the local driver makes it: a limit, the agent's group and the containers'.
      await slice.create({ vcpus: 1, ram: 320 * MiB });
      const agent = cgroupAt(host, `${slice.path}/agent`);
      const containers = cgroupAt(host, `${slice.path}/containers`);
      await agent.create({ vcpus: 1, ram: 320 * MiB });
      await containers.create({ vcpus: 1, ram: 320 * MiB });
      // The "agent" holds 96 MiB (touched); the containers' group holds nothing.
      const joinGroup = agent
        .procsFiles()
        .map((f) => `echo $$ > ${f}`)
        .join('; ');
      const holder = spawn('sh', ['-c', `${joinGroup}; ${GROW.repeat(12)} wait`], { stdio: 'ignore' });
      try {
        await waitFor(
          async () => (await agent.stats()).ramBytes > 90 * MiB,
          ms(20_000),
          'the agent group to hold 96 MiB',
        );
        const enclosing = await enclosingLimits(host, containers.path);
        const sample = await cgroupSampler(containers, host.root, false, enclosing)();
        assert.ok(sample.ramBytes < 8 * MiB, `the containers use ${toMiB(sample.ramBytes)} MiB`);
        assert.equal(sample.enclosing?.name, `cgroup ${slice.path}`);
        assert.equal(sample.enclosing?.limitBytes, 320 * MiB);
        assert.ok(
          sample.enclosing.ramBytes > 90 * MiB,
          `the slice holds the agent's ${toMiB(sample.enclosing.ramBytes)} MiB`,
        );
        // 320 MiB of capacity less the containers' use leaves over 300 MiB; the slice has under 230 free.
        const limits = { capacityBytes: 320 * MiB, headroomBytes: 240 * MiB, psiPercent: null };
        assert.equal(decidePressure({ ...sample, enclosing: undefined }, limits), null);
        const p = decidePressure(sample, limits);
        assert.match(p?.why ?? '', new RegExp(`in use in cgroup ${slice.path} \\(the containers \\d+MiB\\)`));
        return {
          containersMiB: toMiB(sample.ramBytes),
          sliceMiB: toMiB(sample.enclosing.ramBytes),
          needMiB: toMiB(p!.need),
        };
      } finally {
        holder.kill('SIGKILL');
      }
    });
  },
};

/** Whether the kernel says the group is frozen: v2 `cgroup.events` "frozen 1", v1 `freezer.state` FROZEN. */
async function kernelFrozen(cg: Cgroup): Promise<boolean> {
  for (const dir of await cg.dirs()) {
    if (cg.version === 2) return /^frozen 1$/m.test(await readFile(join(dir, 'cgroup.events'), 'utf8'));
    if (dir.includes('/freezer/'))
      return (await readFile(join(dir, 'freezer.state'), 'utf8')).trim() === 'FROZEN';
  }
  throw new Error(`no freezer file for cgroup ${cg.path}`);
}

/** The last number a counter printed to its stdout file (0 before the first). */
async function lastNumber(workDir: string): Promise<number> {
  const text = await readFile(join(workDir, 'stdout'), 'utf8').catch(() => '');
  const nums = text.split('\n').filter((l) => /^\d+$/.test(l));
  return nums.length ? Number(nums[nums.length - 1]) : 0;
}

/**
 * Rejects when `h` ends before `p` settles: a container that must still run (the guaranteed one) ending
 * early is the failure, not a timeout later.
 */
function unlessEnded<T>(h: RunHandle, what: string, p: Promise<T>): Promise<T> {
  const ended = h.wait().then((info: ExitInfo) => {
    throw new Error(`${what}, but the guaranteed container ended first: ${JSON.stringify(info)}`);
  });
  ended.catch(() => {});
  return Promise.race([p, ended]);
}

/** 8 MiB more memory, touched and held (dd's buffer, while it blocks writing into a pipe nobody reads). */
export const GROW = 'dd if=/dev/zero bs=8M count=1 2>/dev/null | sleep 100000 &';

export const watcherCase: CgroupCase = {
  name: 'the pressure watcher freezes the opportunistic container when the guaranteed one grows into its memory; no OOM kill',
  async run() {
    return withTopGroup('berth-pressure', async (parent) => {
      // The instance: 320 MiB for both containers. The opportunistic one holds 96 MiB of it; the guaranteed
      // one grows in 8 MiB steps until it is told to hold (the watcher reclaimed), then, once the
      // opportunistic one is gone, 64 MiB more: a total that fits only because the other was ended.
      const limit = 320 * MiB;
      await parent.create({ vcpus: 2, ram: limit });
      const runtime = new ProcessRuntime(undefined, { cgroupParent: parent.path });
      const log: string[] = [];
      let reclaimLogged: (fields: Record<string, unknown>) => void = () => {};
      const reclaimLog = new Promise<Record<string, unknown>>((r) => (reclaimLogged = r));
      const agentLog = {
        info: (_o: object, m: string) => void log.push(m),
        warn: (o: object, m: string) => {
          log.push(m);
          if (/reclaimed/.test(m)) reclaimLogged(o as Record<string, unknown>);
        },
      };
      const oppSpec = await spec(
        null,
        sh(`${GROW.replace('8M', '96M')} i=0; while :; do i=$((i+1)); echo $i; sleep 0.05; done`),
        { ram: 128 * MiB },
      );
      const gSpec = await spec(
        null,
        sh(
          `n=0; while [ ! -e hold ]; do
             [ $n -ge 40 ] && { echo "grew $((n*8)) MiB and was never told to hold"; exit 3; }
             ${GROW} n=$((n+1)); echo "grown $((n*8))"; sleep 0.2
           done
           echo "held at $((n*8))"
           while [ ! -e go ]; do sleep 0.05; done
           i=0; while [ $i -lt 8 ]; do ${GROW} i=$((i+1)); sleep 0.1; done
           echo "grown to $(((n+8)*8))"
           while [ ! -e end ]; do sleep 0.05; done; echo done`,
        ),
        { ram: 288 * MiB },
      );
      const scratch = (s: { workDir: string }, f: string) => join(s.workDir, 'scratch', f);
      const opp = track(await runtime.start(oppSpec));
      let g: RunHandle | null = null;
      const oppCg = cgroupAt(await probeCgroups(), `${parent.path}/${oppSpec.id}`);
      const oppStarted = Date.now();
      const reclaimed: { why: string | null } = { why: null };
      const runners: WatchedRunner[] = [];
      runners.push({
        id: oppSpec.id,
        startedAt: oppStarted,
        opportunistic: true,
        supervised: true,
        freeze: () => opp.freeze(),
        thaw: () => opp.thaw(),
        usage: async () => {
          const u = await opp.usage();
          return {
            ramBytes: u.ramBytes,
            vcpus: u.cpuSeconds / Math.max(0.001, (Date.now() - oppStarted) / 1000),
          };
        },
        // The agent's reclaim (runner.ts) stops it at once; here it is kept frozen until the checks below are
        // done, and the guaranteed one is told to stop growing meanwhile.
        reclaim: async (why) => {
          reclaimed.why = why;
          await writeFile(scratch(gSpec, 'hold'), '');
        },
      });
      const stop = new AbortController();
      const watching = watchPressure(
        {
          intervalMs: 20,
          headroomBytes: 64 * MiB,
          marginBytes: 32 * MiB,
          psiPercent: null,
          cpuPercent: null,
          instanceRam: null, // the parent group's limit: read from memory.max / memory.limit_in_bytes
          instanceVcpus: null,
          cgroupParent: parent.path,
        },
        () => runners,
        agentLog,
        stop.signal,
      );
      try {
        await waitFor(
          async () => (await lastNumber(oppSpec.workDir)) >= 3,
          ms(20_000),
          'the counter to count',
        );
        await waitFor(
          async () => (await opp.usage()).ramBytes >= 96 * MiB,
          ms(20_000),
          'the opportunistic container to hold 96 MiB',
        );
        assert.equal(await kernelFrozen(oppCg), false, 'frozen before any pressure');
        const gh = track(await runtime.start(gSpec));
        g = gh;
        const fields = await unlessEnded(
          gh,
          'waiting for the reclaim',
          Promise.race([
            reclaimLog,
            new Promise<never>((_, reject) =>
              setTimeout(
                () => reject(new Error(`no reclaim within ${ms(60_000)} ms: ${log.join('; ')}`)),
                ms(60_000),
              ),
            ),
          ]),
        );
        // The opportunistic container, frozen by the watcher: the kernel says so, and its counter and CPU
        // time stand still while the guaranteed one runs on.
        assert.equal(await kernelFrozen(oppCg), true, 'the kernel reports the opportunistic group frozen');
        const count = await lastNumber(oppSpec.workDir);
        const cpu = (await oppCg.stats()).cpuSeconds;
        await new Promise((r) => setTimeout(r, 1000)); // watching for a count that must not come
        assert.equal(await lastNumber(oppSpec.workDir), count, 'the frozen counter advanced');
        assert.equal((await oppCg.stats()).cpuSeconds, cpu, 'the frozen group used CPU');
        assert.equal(await kernelFrozen(oppCg), true, 'still frozen');
        const parentAtPressure = await parent.stats();
        assert.ok(
          parentAtPressure.inactiveFileBytes >= 0 &&
            parentAtPressure.inactiveFileBytes <= parentAtPressure.ramBytes,
          `inactive file ${parentAtPressure.inactiveFileBytes} within the use ${parentAtPressure.ramBytes}`,
        );
        const psiMemory = await readPsi(join((await parent.dirs())[0]!, 'memory.pressure'));
        const oppRam = (await oppCg.stats()).ramBytes;
        // Then ended, as the agent ends a reclaimed container, and the guaranteed one grows on.
        await opp.signal('SIGKILL');
        await opp.wait();
        runners.length = 0;
        await writeFile(scratch(gSpec, 'go'), '');
        await unlessEnded(
          gh,
          'waiting for it to grow past what fits beside the opportunistic one',
          waitFor(
            async () => (await gh.usage()).ramBytes + oppRam > limit,
            ms(60_000),
            `the guaranteed container to use more than ${toMiB(limit - oppRam)} MiB`,
          ),
        );
        const gPeak = (await gh.usage()).peakRamBytes;
        await writeFile(scratch(gSpec, 'end'), '');
        const info = await gh.wait();
        assert.equal(info.exitCode, 0, `the guaranteed container's exit (${JSON.stringify(info)})`);
        assert.equal(info.oomKilled, false, 'the guaranteed container was OOM-killed');
        assert.equal((await parent.stats()).oomKills, 0, "OOM kills in the instance's group");
        assert.match(reclaimed.why ?? '', /^memory pressure: \d+MiB of 320MiB in use, under 64MiB free$/);
        assert.deepEqual(fields.containers, [oppSpec.id], 'reclaimed');
        const freezeMs = Number(fields.freeze_ms);
        assert.ok(freezeMs >= 0, `freeze_ms ${String(fields.freeze_ms)}`);
        return {
          signalToFrozenMs: freezeMs,
          counterAtFreeze: count,
          oppMiB: toMiB(oppRam),
          instanceUseMiB: toMiB(parentAtPressure.ramBytes),
          inactiveFileMiB: toMiB(parentAtPressure.inactiveFileBytes),
          guaranteedPeakMiB: toMiB(gPeak),
          psiMemory: psiMemory ?? 'none',
        };
      } finally {
        stop.abort();
        await watching;
        // Both ended before their groups and the instance's are removed.
        for (const h of [opp, g])
          if (h) {
            await h.signal('SIGKILL').catch(() => {});
            await h.wait().catch(() => {});
          }
      }
    });
  },
};
