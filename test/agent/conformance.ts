// The behaviour every runtime must show, run against each real runtime available on the machine
// (process.test.ts, runc.test.ts, docker.test.ts, podman.test.ts call `runtimeConformance`).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect } from 'vitest';
import { Supervisor } from '../../src/agent/supervisor.js';
import type { RuntimeOptions } from '../../src/agent/runtimes/detect.js';
import type { Runtime } from '../../src/agent/runtimes/types.js';
import { itIf } from '../helpers/needs.js';
import { RUNTIME_CASES } from './cases.js';
import {
  cleanupHandles,
  cleanupWorkDirs,
  collect,
  leftovers,
  spec,
  track,
  waitFor,
  waitForOutput,
} from './helpers.js';

const MiB = 1024 * 1024;

/** Questions asked of a runtime's own records (test probes, not part of the Runtime interface). */
export interface Probes {
  /** Whether the container ended. */
  ended(id: string, workDir: string): Promise<boolean>;
  /** Whether the runtime's daemon still holds a container for this id (docker, podman). */
  held?(id: string): Promise<boolean>;
}

const FIXTURE = fileURLToPath(new URL('./fixtures/start-and-hang.ts', import.meta.url));
const VITE_NODE = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));

/** null when equal, else where two texts part (line number and both lines), to keep failures readable. */
function firstDifference(got: string, want: string): string | null {
  if (got === want) return null;
  const g = got.split('\n');
  const w = want.split('\n');
  const i = g.findIndex((line, k) => line !== w[k]);
  const at = i === -1 ? g.length : i;
  return `${g.length - 1} lines instead of ${w.length - 1}; first difference at line ${at + 1}: got ${JSON.stringify(g[at])}, want ${JSON.stringify(w[at])}`;
}

/** How a runtime's suite differs from the default. */
export interface ConformanceOptions {
  /**
   * The suite's own deadlines are multiplied by this: a runtime whose start takes seconds (the vm runtime
   * boots a guest under emulation) gets as long, relative to its start, as the others.
   */
  timeScale?: number;
  /** What the re-attach case's "agent" process creates its runtime with (createRuntime's options). */
  runtimeOptions?: RuntimeOptions;
}

export function runtimeConformance(
  runtime: Runtime,
  image: string | null,
  missing: string | null,
  probes: Probes,
  opts: ConformanceOptions = {},
): void {
  const { ended } = probes;
  const scale = opts.timeScale ?? 1;
  const it = itIf(missing);
  const sh = (script: string): string[] => ['/bin/sh', '-c', script];

  describe(`${runtime.name} runtime`, () => {
    afterEach(async () => {
      await cleanupHandles();
      const left = await leftovers(probes.held);
      await cleanupWorkDirs();
      expect(left, 'cgroups, mounts or containers left behind').toEqual([]);
    });

    it('passes exit codes through (0, 3, 137 for SIGKILL)', async () => {
      for (const [script, code] of [
        ['exit 0', 0],
        ['exit 3', 3],
      ] as const) {
        const h = track(await runtime.start(await spec(image, sh(script))));
        const info = await h.wait();
        expect(info.exitCode, script).toBe(code);
        expect(info.oomKilled).toBe(false);
        expect(info.signal).toBeUndefined();
      }
      const h = track(await runtime.start(await spec(image, sh('echo ready; sleep 30'))));
      await waitForOutput(h, 'ready');
      await h.signal('SIGKILL');
      const info = await h.wait();
      expect(info.exitCode).toBe(137);
      expect(info.signal).toBe('SIGKILL');
      expect(info.oomKilled).toBe(false);
    });

    it('a SIGKILL right after start ends the container (runc starts it a moment after start() returns)', async () => {
      const h = track(await runtime.start(await spec(image, sh('sleep 30'))));
      await h.signal('SIGKILL');
      let timer: NodeJS.Timeout | undefined;
      const info = await Promise.race([
        h.wait(),
        new Promise<null>((r) => (timer = setTimeout(() => r(null), 15_000 * scale))),
      ]);
      clearTimeout(timer);
      expect(info?.exitCode, 'ended by the kill within 15 s').toBe(137);
    });

    it('captures 10,000 interleaved stdout and stderr lines complete and in order', async () => {
      const script = 'i=0; while [ $i -lt 10000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done';
      const h = track(await runtime.start(await spec(image, sh(script))));
      const [out, info] = await Promise.all([collect(h), h.wait()]);
      expect(info.exitCode).toBe(0);
      const want = (p: string): string => Array.from({ length: 10000 }, (_, i) => `${p} ${i}\n`).join('');
      expect(firstDifference(out.stdout, want('out'))).toBeNull();
      expect(firstDifference(out.stderr, want('err'))).toBeNull();
      // A second reader (a re-attached agent) sees the same complete output.
      const again = await collect(h);
      expect(again.stdout.length).toBe(out.stdout.length);
    });

    // Runtimes that split their start (Runtime.prepare): the agent prepares while the start is reported.
    if (runtime.prepare) {
      const prepare = runtime.prepare.bind(runtime);
      it('prepare then start runs it; prepare then abandon leaves nothing (no cgroup, no scratch)', async () => {
        const h = track(await (await prepare(await spec(image, sh('echo prepared')))).start());
        const [out, info] = await Promise.all([collect(h), h.wait()]);
        expect(info.exitCode).toBe(0);
        expect(out.stdout).toBe('prepared\n');
        const s = await spec(image, sh('echo must not run'));
        const p = await prepare(s);
        await p.abandon();
        expect(await leftovers(probes.held), 'what prepare made, after abandon').toEqual([]);
        expect(existsSync(join(s.workDir, 'scratch')), 'its scratch dir').toBe(false);
        expect(existsSync(join(s.workDir, 'stdout')), 'it never ran').toBe(false);
      });
    }

    // The cases that depend on the host's cgroups, shared with the cgroup v2 guest (cases.ts).
    for (const c of RUNTIME_CASES) it(c.name, () => c.run(runtime, image).then(() => {}));

    it('cancel: SIGTERM, then SIGKILL after the grace period for a process that traps SIGTERM', async () => {
      const h = track(
        await runtime.start(
          await spec(image, sh(`trap 'echo got-term' TERM; echo ready; while :; do sleep 0.1; done`)),
        ),
      );
      await waitForOutput(h, 'ready');
      const sup = new Supervisor(h, { killGraceMs: 500 });
      const t0 = Date.now();
      await sup.cancel();
      const info = await sup.wait();
      const took = Date.now() - t0;
      expect(info.exitCode).toBe(137);
      expect(info.reason).toBe('cancelled');
      expect(took).toBeGreaterThanOrEqual(450);
      expect(took).toBeLessThan(10_000);
    });

    it('max_run_time kills the container with the reason', async () => {
      const h = track(await runtime.start(await spec(image, sh('sleep 30'))));
      const sup = new Supervisor(h, { maxRunTimeMs: 300, killGraceMs: 200 });
      const info = await sup.wait();
      expect(info.reason).toBe('killed: max_run_time 300ms exceeded');
      expect(info.exitCode).not.toBe(0);
      expect(info.wallMs).toBeLessThan(10_000);
    });

    it('scratch overuse kills the container with the reason', async () => {
      const h = track(
        await runtime.start(
          await spec(
            image,
            sh('dd if=/dev/zero of=big bs=1M count=8 2>/dev/null; sync; echo written; sleep 30'),
            {
              scratch: 4 * MiB,
            },
          ),
        ),
      );
      const sup = new Supervisor(h, { scratchBytes: 4 * MiB, sampleIntervalMs: 50, killGraceMs: 200 });
      const info = await sup.wait();
      expect(info.reason).toMatch(/^killed: scratch \d+(\.\d+)?MiB > limit 4MiB$/);
      expect(info.exitCode).not.toBe(0);
    });

    it('re-attaches after the agent died: output and exit of a container that ended meanwhile and of one still running', async () => {
      const a = await spec(image, sh('echo before; echo after >&2; exit 7'));
      const b = await spec(image, sh('echo b-started; echo b-err >&2; sleep 60'));
      // The "agent": a separate node process that starts both containers and is then killed with SIGKILL.
      const agent = spawn(
        process.execPath,
        [
          VITE_NODE,
          FIXTURE,
          JSON.stringify({ runtime: runtime.name, specs: [a, b], options: opts.runtimeOptions }),
        ],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let said = '';
      agent.stdout.on('data', (d: Buffer) => (said += d.toString()));
      agent.stderr.on('data', (d: Buffer) => (said += d.toString()));
      try {
        await waitFor(
          () => said.includes('started') || agent.exitCode !== null,
          30_000 * scale,
          'the agent process to start both containers',
        );
        expect(said).toContain('started');
      } finally {
        if (agent.exitCode === null) {
          agent.kill('SIGKILL');
          await once(agent, 'exit');
        }
        // Whatever happened, take the containers over so that cleanup reaches them.
        for (const s of [a, b]) {
          const h = await runtime.reattach(s.id, s.workDir);
          if (h) track(h);
        }
      }
      await waitFor(() => ended(a.id, a.workDir), 10_000 * scale, 'container a to end while no agent runs');
      expect(await ended(b.id, b.workDir)).toBe(false);

      const ha = await runtime.reattach(a.id, a.workDir);
      const hb = await runtime.reattach(b.id, b.workDir);
      expect(ha).not.toBeNull();
      expect(hb).not.toBeNull();
      const [outA, infoA] = await Promise.all([collect(ha!), ha!.wait()]);
      expect(infoA.exitCode).toBe(7);
      expect(outA.stdout).toBe('before\n');
      expect(outA.stderr).toBe('after\n');
      // b still runs under the new agent, which can stop it.
      // Both lines arrived before the kill (the vm runtime carries stdout and stderr on separate channels
      // from the guest: one may lag the other, and what is still in the guest when it is killed is lost).
      await waitForOutput(hb!, 'b-started');
      await waitForOutput(hb!, 'b-err');
      await hb!.signal('SIGKILL');
      const [outB, infoB] = await Promise.all([collect(hb!), hb!.wait()]);
      expect(infoB.exitCode).toBe(137);
      expect(outB.stdout).toBe('b-started\n');
      expect(outB.stderr).toBe('b-err\n');
      // Once collected, the result is durable: a later re-attach returns the same exit without the runtime.
      const again = await runtime.reattach(b.id, b.workDir);
      expect((await again!.wait()).exitCode).toBe(137);
      expect(await runtime.reattach('no-such-container', a.workDir)).toBeNull();
    });
  });
}
