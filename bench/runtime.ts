// `npm run bench -- runtime [--json] [--runs N] [--runtimes process,runc,docker,podman] [--hold N]`
//
// For each runtime available here:
// - start-to-exit overhead of `true`: from start() until wait() has resolved (exit recorded, usage read,
//   cgroup/container removed), median and p99 over --runs runs after 3 warm-up runs;
// - freeze latency: from RunHandle.freeze() until the kernel (or the engine) reports the container frozen,
//   and the same for thaw(), on a container running a busy loop, median and p99 over --runs freezes;
// - memory per running container: --hold containers running `sleep`, measured as the agent's own
//   heap and RSS growth and the RSS of the host-side helpers each container costs (our shim, `runc run`,
//   containerd-shim, conmon), divided by the number of containers.
// Images: the test image of scripts/build-test-image.sh (tarball for runc, imported image for docker/podman).
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  DETECT_ORDER,
  RUNTIME_NAMES,
  createRuntime,
  type RuntimeName,
} from '../src/agent/runtimes/detect.js';
import { ensureRootfs } from '../src/agent/runtimes/image.js';
import { ociConfig } from '../src/agent/runtimes/oci.js';
import type { RunHandle, RunSpec, Runtime } from '../src/agent/runtimes/types.js';
import { benchArgs, opt } from './args.js';

// A full collection before each heap reading, or the per-container heap is mostly garbage noise.
setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;

const CACHE = process.env.BERTH_TEST_CACHE ?? '/var/cache/berth-test';
const IMAGES: Record<RuntimeName, string | null> = {
  process: null,
  runc: join(CACHE, 'busybox-rootfs.tar'),
  docker: 'berth-test-busybox:latest',
  podman: 'berth-test-busybox:latest',
  vm: null, // the guest's own root (docs/RUNTIMES.md); measured only when named in --runtimes
};
const HELPERS = /^(runc|containerd-shim.*|conmon)$/;

interface Result {
  runtime: string;
  skipped?: string;
  runs?: number;
  medianMs?: number;
  p99Ms?: number;
  meanMs?: number;
  /** The same `true` without Berth: `sh -c true` (process) or a bare `runc run` of a prepared bundle (runc). */
  baselineMedianMs?: number;
  freezeMedianMs?: number;
  freezeP99Ms?: number;
  thawMedianMs?: number;
  held?: number;
  agentHeapKiBPerContainer?: number;
  agentRssKiBPerContainer?: number;
  helperRssKiBPerContainer?: number;
}

let seq = 0;
async function spec(runtime: RuntimeName, command: string[]): Promise<RunSpec> {
  seq += 1;
  return {
    id: `bench-${process.pid}-${seq}`,
    image: IMAGES[runtime],
    command,
    env: {},
    vcpus: 1,
    ram: 256 * 1024 * 1024,
    scratch: 0,
    gpus: 0,
    workDir: await mkdtemp(join(tmpdir(), 'berth-bench-')),
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** RSS in KiB of the host-side helper processes not present in `before`. */
async function helperRssKiB(before: Set<number>): Promise<number> {
  let total = 0;
  for (const name of await readdir('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || before.has(pid)) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const comm = /^Name:\s+(\S+)/m.exec(status)?.[1] ?? '';
    if (!HELPERS.test(comm) && !cmdline.split('\0').includes('berth-shim')) continue;
    total += Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  }
  return total;
}

async function pids(): Promise<Set<number>> {
  return new Set((await readdir('/proc')).map(Number).filter((n) => Number.isInteger(n)));
}

async function benchOne(name: RuntimeName, runs: number, hold: number): Promise<Result> {
  const rt: Runtime = createRuntime(name, { pull: false });
  const why = await rt.available();
  if (why) return { runtime: name, skipped: why };
  const image = IMAGES[name];
  if (
    image?.startsWith('/') &&
    !(await readFile(image).then(
      () => true,
      () => false,
    ))
  )
    return { runtime: name, skipped: `${image} missing (run scripts/build-test-image.sh)` };

  const times: number[] = [];
  for (let i = 0; i < runs + 3; i++) {
    const s = await spec(name, ['true']);
    const t0 = performance.now();
    const h = await rt.start(s);
    const info = await h.wait();
    const ms = performance.now() - t0;
    await rm(s.workDir, { recursive: true, force: true });
    if (info.exitCode !== 0) throw new Error(`${name}: true exited ${info.exitCode}`);
    if (i >= 3) times.push(ms);
  }
  times.sort((a, b) => a - b);
  const baseline = await baselineTimes(name, runs);
  const freeze = await freezeTimes(rt, name, runs);

  const before = await pids();
  gc();
  const mem0 = process.memoryUsage();
  const held: { h: RunHandle; s: RunSpec }[] = [];
  try {
    for (let i = 0; i < hold; i++) {
      const s = await spec(name, ['sleep', '60']);
      held.push({ h: await rt.start(s), s });
    }
    gc();
    const mem1 = process.memoryUsage();
    const helpers = await helperRssKiB(before);
    return {
      runtime: name,
      runs,
      medianMs: round(percentile(times, 50)),
      p99Ms: round(percentile(times, 99)),
      meanMs: round(times.reduce((a, b) => a + b, 0) / times.length),
      ...(baseline ? { baselineMedianMs: round(percentile(baseline, 50)) } : {}),
      freezeMedianMs: round(percentile(freeze.freeze, 50)),
      freezeP99Ms: round(percentile(freeze.freeze, 99)),
      thawMedianMs: round(percentile(freeze.thaw, 50)),
      held: hold,
      agentHeapKiBPerContainer: round((mem1.heapUsed - mem0.heapUsed) / 1024 / hold),
      agentRssKiBPerContainer: round((mem1.rss - mem0.rss) / 1024 / hold),
      helperRssKiBPerContainer: round(helpers / hold),
    };
  } finally {
    for (const { h } of held) await h.signal('SIGKILL');
    for (const { h, s } of held) {
      await h.wait();
      await rm(s.workDir, { recursive: true, force: true });
    }
  }
}

/** Freeze and thaw latencies (sorted) of one busy container, `runs` times each. */
async function freezeTimes(
  rt: Runtime,
  name: RuntimeName,
  runs: number,
): Promise<Record<'freeze' | 'thaw', number[]>> {
  const s = await spec(name, ['/bin/sh', '-c', 'while :; do :; done']);
  const h = await rt.start(s);
  const out = { freeze: [] as number[], thaw: [] as number[] };
  try {
    for (let i = 0; i < runs; i++) {
      let t0 = performance.now();
      await h.freeze();
      out.freeze.push(performance.now() - t0);
      t0 = performance.now();
      await h.thaw();
      out.thaw.push(performance.now() - t0);
    }
  } finally {
    await h.signal('SIGKILL');
    await h.wait();
    await rm(s.workDir, { recursive: true, force: true });
  }
  out.freeze.sort((a, b) => a - b);
  out.thaw.sort((a, b) => a - b);
  return out;
}

async function timeProcess(cmd: string, args: string[]): Promise<number> {
  const t0 = performance.now();
  const child = spawn(cmd, args, { stdio: 'ignore' });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${code}`);
  return performance.now() - t0;
}

/** What the same `true` costs without Berth around it, to separate Berth's overhead from the runtime's. */
async function baselineTimes(name: RuntimeName, runs: number): Promise<number[] | null> {
  const times: number[] = [];
  if (name === 'process') {
    for (let i = 0; i < runs; i++) times.push(await timeProcess('/bin/sh', ['-c', 'true']));
  } else if (name === 'runc') {
    const bundle = await mkdtemp(join(tmpdir(), 'berth-bench-bundle-'));
    try {
      const rootfs = await ensureRootfs(IMAGES.runc!);
      await mkdir(join(bundle, 'rootfs'));
      const config = ociConfig({
        args: ['true'],
        env: {},
        cwd: '/',
        hostname: 'b',
        cgroupsPath: '',
        vcpus: 1,
        ram: 256 << 20,
      });
      // Read-only rootfs straight from the cache: no overlay, no Berth cgroup, runc deletes on exit.
      const c = config as { root: { path: string; readonly: boolean }; linux: { cgroupsPath?: string } };
      c.root = { path: rootfs, readonly: true };
      delete c.linux.cgroupsPath;
      await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
      for (let i = 0; i < runs; i++)
        times.push(
          await timeProcess('runc', ['run', '--bundle', bundle, `berth-bench-base-${process.pid}-${i}`]),
        );
    } finally {
      await rm(bundle, { recursive: true, force: true });
    }
  } else {
    return null;
  }
  return times.sort((a, b) => a - b);
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

export async function run(args: string[]): Promise<number> {
  const {
    json,
    runs,
    hold,
    runtimes: names,
  } = benchArgs('runtime', args, {
    json: opt.flag('print JSON'),
    runs: opt.int(30, 'timed runs of each runtime'),
    runtimes: opt.someOf(RUNTIME_NAMES, DETECT_ORDER, 'the runtimes measured'),
    hold: opt.int(10, 'containers held running for the memory figure'),
  });
  const results: Result[] = [];
  for (const n of names) results.push(await benchOne(n, runs, hold));
  if (json) {
    console.log(JSON.stringify({ bench: 'runtime', runs, hold, results }, null, 2));
    return 0;
  }
  console.log(
    `runtime start-to-exit of \`true\` (${runs} runs after 3 warm-up), freeze/thaw of a busy container ` +
      `(${runs} each), memory with ${hold} containers held`,
  );
  console.log(
    'runtime   median ms   p99 ms   mean ms   baseline ms   freeze ms (p99)   thaw ms   agent heap KiB/ctr   agent RSS KiB/ctr   helpers RSS KiB/ctr',
  );
  for (const r of results) {
    if (r.skipped) {
      console.log(`${r.runtime.padEnd(9)} skipped: ${r.skipped}`);
      continue;
    }
    console.log(
      [
        r.runtime.padEnd(9),
        String(r.medianMs).padStart(9),
        String(r.p99Ms).padStart(8),
        String(r.meanMs).padStart(9),
        String(r.baselineMedianMs ?? '-').padStart(13),
        `${r.freezeMedianMs} (${r.freezeP99Ms})`.padStart(17),
        String(r.thawMedianMs).padStart(9),
        String(r.agentHeapKiBPerContainer).padStart(20),
        String(r.agentRssKiBPerContainer).padStart(19),
        String(r.helperRssKiBPerContainer).padStart(21),
      ].join(' '),
    );
  }
  return 0;
}
