// `npm run bench -- pressure [--runs N] [--interval MS] [--runtime process|runc]`: the freeze latency of the
// agent's pressure watcher (issue 16 item 2, target ≤ 100 ms from the pressure signal), on a real cgroup.
//
// Each run: an instance group with a 384 MiB limit; an opportunistic container holding 120 MiB; a guaranteed
// one growing 4 MiB every 20 ms to 200 MiB. The watcher (the agent's own PressureWatcher and cgroup
// sampler) samples every --interval ms. Reported per run:
// - signal → frozen: from the sample that showed the pressure until the kernel confirmed the
//   opportunistic container frozen (the target);
// - crossing → signal: from the last sample under the threshold to the signal (at most one interval plus
//   a sample's read: how late the watcher can see the pressure);
// - whether the guaranteed container finished without an OOM kill.
import { mkdtemp, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cgroupSampler, PressureWatcher, type ReclaimEvent } from '../src/agent/pressure.js';
import { CGROUP_ROOT, cgroupAt, probeCgroups } from '../src/agent/runtimes/cgroup.js';
import { createRuntime } from '../src/agent/runtimes/detect.js';
import type { RunHandle, RunSpec } from '../src/agent/runtimes/types.js';
import { benchArgs, opt } from './args.js';

const MiB = 1024 * 1024;

const allocator = (mib: number, stepMs: number, holdMs: number) =>
  `const held = []; let n = 0; const step = () => { if (n >= ${mib}) { console.log('holding'); ` +
  `setTimeout(() => {}, ${holdMs}); return; } held.push(Buffer.alloc(4 * 1048576, 1)); n += 4; ` +
  `setTimeout(step, ${stepMs}); }; step();`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function until(f: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function run(args: string[]): Promise<number> {
  const {
    runs,
    interval: intervalMs,
    runtime,
  } = benchArgs('pressure', args, {
    runs: opt.int(10, 'reclaims measured'),
    interval: opt.int(20, "the pressure watcher's sampling interval, ms"),
    runtime: opt.oneOf(['process', 'runc'] as const, 'process', 'the runtime the containers run on'),
  });
  const host = await probeCgroups();
  if (host.unusable) {
    console.error(`cgroups unusable: ${host.unusable}`);
    return 2;
  }
  const parentPath = `berth-bench-pressure-${randomBytes(4).toString('hex')}`;
  const parent = cgroupAt(host, parentPath);
  await parent.create({ vcpus: 2, ram: 384 * MiB });
  const rt = createRuntime(runtime, { cgroupParent: parentPath, process: { sandbox: 'none' } });
  const why = await rt.available();
  if (why) {
    console.error(`${runtime}: ${why}`);
    return 2;
  }
  const freeze: number[] = [];
  const detect: number[] = [];
  let ooms = 0;
  try {
    for (let i = 0; i < runs; i++) {
      const dirs: string[] = [];
      const spec = async (id: string, script: string): Promise<RunSpec> => {
        const workDir = await mkdtemp(join(tmpdir(), 'berth-bench-pressure-'));
        dirs.push(workDir);
        return {
          id: `${id}-${randomBytes(3).toString('hex')}`,
          image: null,
          command: ['node', '-e', script],
          env: {},
          vcpus: 1,
          ram: 256 * MiB,
          scratch: 0,
          gpus: 0,
          workDir,
        };
      };
      const handles: RunHandle[] = [];
      try {
        const opp = await rt.start(await spec('opp', allocator(120, 2, 600_000)));
        handles.push(opp);
        await until(async () => (await opp.usage()).ramBytes > 120 * MiB, 30_000, 'the opportunistic hold');
        // When the last two samples were taken: the one before the signal was the last quiet one.
        let lastQuiet = performance.now();
        let latest = lastQuiet;
        const sample = cgroupSampler(parent, CGROUP_ROOT, false);
        let event: ReclaimEvent | null = null;
        const stop = new AbortController();
        const watcher = new PressureWatcher({
          limits: { capacityBytes: null, headroomBytes: 64 * MiB, marginBytes: 32 * MiB, psiPercent: null },
          sample: async () => {
            lastQuiet = latest;
            latest = performance.now();
            return sample();
          },
          opportunistic: () => [
            {
              id: 'opp',
              startedAt: 0,
              freeze: () => opp.freeze(),
              thaw: () => opp.thaw(),
              usage: async () => ({ ramBytes: (await opp.usage()).ramBytes, vcpus: 0 }),
              reclaim: async () => {
                await opp.freeze();
                void opp.signal('SIGKILL');
              },
            },
          ],
          intervalMs,
          onReclaim: (e) => {
            event = e;
            stop.abort();
          },
        });
        const watching = watcher.run(stop.signal);
        const g = await rt.start(await spec('g', allocator(200, 20, 100)));
        handles.push(g);
        const gInfo = await g.wait();
        stop.abort();
        await watching;
        if (gInfo.oomKilled) ooms++;
        const e = event as ReclaimEvent | null;
        if (e) {
          freeze.push(e.frozenAt - e.signalAt);
          detect.push(Math.max(0, e.signalAt - lastQuiet));
        }
      } finally {
        for (const h of handles) {
          await h.signal('SIGKILL').catch(() => {});
          await h.wait().catch(() => {});
        }
        for (const d of dirs) await rm(d, { recursive: true, force: true });
      }
    }
  } finally {
    await parent.remove().catch(() => {});
  }
  freeze.sort((a, b) => a - b);
  detect.sort((a, b) => a - b);
  const f = (x: number) => x.toFixed(1);
  console.log(
    `pressure watcher, ${runtime} runtime, interval ${intervalMs} ms, ${runs} runs (${freeze.length} reclaims):`,
  );
  if (freeze.length) {
    console.log(
      `  signal → frozen   median ${f(percentile(freeze, 50))} ms, p99 ${f(percentile(freeze, 99))} ms, max ${f(freeze.at(-1)!)} ms`,
    );
    console.log(
      `  last quiet sample → signal   median ${f(percentile(detect, 50))} ms, max ${f(detect.at(-1)!)} ms`,
    );
  }
  console.log(`  guaranteed containers OOM-killed: ${ooms} of ${runs}`);
  return freeze.length === runs && ooms === 0 ? 0 : 1;
}
