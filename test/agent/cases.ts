// The runtime cases that depend on the host's cgroups: hard limits, OOM reporting, usage, freeze/thaw and
// discard. Written once, run in two places: by the conformance suite on this (cgroup v1) host under vitest
// (conformance.ts), and inside a cgroup v2 guest under QEMU (test/guest/), where vitest is too slow to
// start, so the checks use node:assert and every case returns the numbers it measured.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunHandle, Runtime } from '../../src/agent/runtimes/types.js';
import { collect, spec, track, waitFor, waitForOutput } from './helpers.js';

const MiB = 1024 * 1024;

/** Deadlines are multiplied by this (the guest sets it: everything is ~10× slower under emulation). */
export const TIME_SCALE = Number(process.env.BERTH_TEST_TIME_SCALE ?? 1) || 1;
const ms = (n: number): number => n * TIME_SCALE;

/** What a case measured, for the report (the guest prints it; the host test shows it). */
export type Measured = Record<string, number | string | boolean>;

/** A case: runs against one runtime and its test image, throws (node:assert) when the runtime is wrong. */
export interface RuntimeCase {
  name: string;
  run(runtime: Runtime, image: string | null): Promise<Measured>;
}

const sh = (script: string): string[] => ['/bin/sh', '-c', script];

/** A host busy loop whose CPU share (of one CPU, since it started) tells what a single process can get. */
async function startReference(): Promise<{ share(): Promise<number>; stop(): void }> {
  const child = spawn('/bin/sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' });
  await once(child, 'spawn');
  const t0 = performance.now();
  const ticks = async (): Promise<number> => {
    const stat = await readFile(`/proc/${child.pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]); // utime + stime, in 1/100 s
  };
  const start = await ticks();
  return {
    share: async () => ((await ticks()) - start) / 100 / ((performance.now() - t0) / 1000),
    stop: () => child.kill('SIGKILL'),
  };
}

/** Resolves with true once `h` ended, false if it did not within `deadline` ms. */
async function endsWithin(h: RunHandle, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    h.wait().then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), deadline))),
  ]);
  clearTimeout(timer);
  return ended;
}

export const oomCase: RuntimeCase = {
  name: 'OOM-kills a container past its memory limit and reports it',
  async run(runtime, image) {
    const h = track(
      await runtime.start(await spec(image, sh('head -c 300m /dev/zero | tail'), { ram: 64 * MiB })),
    );
    const info = await h.wait();
    assert.equal(info.oomKilled, true, 'oomKilled');
    assert.notEqual(info.exitCode, 0, 'exit code');
    assert.ok(info.peakRamBytes > 32 * MiB, `peak ${info.peakRamBytes} > 32 MiB`);
    assert.ok(info.peakRamBytes <= 64 * MiB, `peak ${info.peakRamBytes} <= the 64 MiB limit`);
    return { exitCode: info.exitCode ?? -1, peakMiB: +(info.peakRamBytes / MiB).toFixed(1) };
  },
};

export const cpuCase: RuntimeCase = {
  name: 'holds a CPU-bound container with vcpus 0.5 to about half a CPU',
  async run(runtime, image) {
    // An unlimited busy loop alongside says how much CPU one process could get meanwhile: on a machine
    // other work saturates, a quota of 0.5 cannot be reached, and only the cap is checked.
    const reference = await startReference();
    try {
      const h = track(
        await runtime.start(
          await spec(image, sh('timeout 2 sh -c "while :; do :; done"; exit 0'), { vcpus: 0.5 }),
        ),
      );
      const info = await h.wait();
      const available = await reference.share();
      const share = info.cpuSeconds / (info.wallMs / 1000);
      assert.ok(info.wallMs > 1500, `ran ${info.wallMs} ms (timeout 2)`);
      assert.ok(share < 0.7, `used ${share.toFixed(2)} CPU under a 0.5 quota`);
      // 0.3 when half a CPU was there to take; on a saturated machine only "it did run".
      const floor = available >= 0.5 ? 0.3 : 0.25 * available;
      assert.ok(
        share > floor,
        `used ${share.toFixed(2)} CPU, an unlimited process got ${available.toFixed(2)} meanwhile`,
      );
      return { share: +share.toFixed(3), unlimitedShare: +available.toFixed(3) };
    } finally {
      reference.stop();
    }
  },
};

export const usageCase: RuntimeCase = {
  name: 'reports peak memory and CPU seconds of a container that used both',
  async run(runtime, image) {
    // A fixed amount of work, not a fixed time, so the CPU seconds do not depend on the machine's load.
    const script =
      'head -c 96m /dev/zero | tail >/dev/null; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done';
    const h = track(await runtime.start(await spec(image, sh(script), { ram: 256 * MiB })));
    let sampled = 0;
    const sampler = setInterval(() => {
      h.usage().then(
        (u) => (sampled = Math.max(sampled, u.ramBytes)),
        () => {},
      );
    }, 50);
    const info = await h.wait().finally(() => clearInterval(sampler));
    assert.equal(info.exitCode, 0, 'exit code');
    assert.equal(info.oomKilled, false, 'oomKilled');
    assert.ok(info.peakRamBytes >= 90 * MiB, `peak ${info.peakRamBytes} >= 90 MiB (tail held 96 MiB)`);
    assert.ok(info.peakRamBytes <= 256 * MiB, `peak ${info.peakRamBytes} <= the 256 MiB limit`);
    // Some CPU was used, and no more than one CPU for the whole run (catches a wrong unit either way).
    assert.ok(info.cpuSeconds > 0.05, `cpuSeconds ${info.cpuSeconds} > 0.05`);
    assert.ok(
      info.cpuSeconds <= info.wallMs / 1000 + 0.05,
      `cpuSeconds ${info.cpuSeconds} <= wall ${info.wallMs / 1000} s`,
    );
    return {
      peakMiB: +(info.peakRamBytes / MiB).toFixed(1),
      cpuSeconds: +info.cpuSeconds.toFixed(3),
      wallMs: info.wallMs,
      sampledRamMiB: +(sampled / MiB).toFixed(1),
    };
  },
};

/** Consecutive numbers 1..N printed by the freeze case's counter (every STEP-th loop turn). */
const STEP = 2000;

export const freezeCase: RuntimeCase = {
  name: 'freeze: a frozen counter does not advance, thawed it continues; a kill ends it frozen',
  async run(runtime, image) {
    const counter = `i=0; n=0; echo ready; while :; do i=$((i+1)); if [ $i -ge ${STEP} ]; then i=0; n=$((n+1)); echo $n; fi; done`;
    const s = await spec(image, sh(counter));
    const h = track(await runtime.start(s));
    // Every runtime keeps the container's stdout in the work dir (engines copy their log there as it comes).
    const lastNumber = async (): Promise<number> => {
      const text = await readFile(join(s.workDir, 'stdout'), 'utf8').catch(() => '');
      const lines = text.split('\n').filter((l) => /^\d+$/.test(l));
      return lines.length ? Number(lines[lines.length - 1]) : 0;
    };
    const cpu = async (): Promise<number> => (await h.usage()).cpuSeconds;
    await waitFor(async () => (await lastNumber()) >= 1, ms(20_000), 'the counter to count');

    let t0 = performance.now();
    await h.freeze();
    const freezeMs = performance.now() - t0;
    const frozenAt = await cpu();
    // Frozen means no CPU at all: the counter's CPU time must not move while we watch.
    await new Promise((r) => setTimeout(r, 500));
    const later = await cpu();
    assert.equal(later, frozenAt, `CPU seconds moved from ${frozenAt} to ${later} while frozen`);
    await h.freeze(); // freezing a frozen container is harmless
    const before = await lastNumber();

    t0 = performance.now();
    await h.thaw();
    const thawMs = performance.now() - t0;
    await waitFor(async () => (await lastNumber()) > before, ms(20_000), 'the thawed counter to count on');

    // Frozen again, a kill still ends it at once (v1 must thaw for the signal to be taken).
    await h.freeze();
    await h.signal('SIGKILL');
    assert.ok(await endsWithin(h, ms(15_000)), 'a frozen container ended on SIGKILL');
    const info = await h.wait();
    assert.equal(info.exitCode, 137, 'exit code');
    // The counter went on where it stopped: 1, 2, 3... with no restart and no gap.
    const lines = (await collect(h)).stdout.trim().split('\n').slice(1).map(Number);
    assert.ok(
      lines.length > before,
      `the counter printed ${lines.length} numbers, ${before} before the thaw`,
    );
    const broken = lines.findIndex((n, k) => n !== k + 1);
    assert.equal(broken, -1, `counter broken at line ${broken + 1}: ${lines.slice(0, 20).join(',')}`);
    return { freezeMs: +freezeMs.toFixed(1), thawMs: +thawMs.toFixed(1), counted: lines.length };
  },
};

export const discardCase: RuntimeCase = {
  name: 'discard: a started container with no run record (agent killed before writing it) is stopped and removed',
  async run(runtime, image) {
    const s = await spec(image, sh('echo ready; sleep 300'));
    const h = await runtime.start(s);
    await waitForOutput(h, 'ready', ms(10_000));
    await rm(join(s.workDir, 'run.json'));
    assert.equal(await runtime.reattach(s.id, s.workDir), null, 'reattach without run.json');
    await runtime.discard(s.id, s.workDir);
    // Stopped: the handle of the lost start sees its end (it would wait 300 s otherwise).
    assert.ok(await endsWithin(h, ms(15_000)), 'the container stopped');
    // And the leak check after the case finds no cgroup, mount or engine container. Discarding again is harmless.
    await runtime.discard(s.id, s.workDir);
    return {};
  },
};

/** The cases in the order they run. */
export const RUNTIME_CASES: readonly RuntimeCase[] = [oomCase, cpuCase, usageCase, freezeCase, discardCase];
