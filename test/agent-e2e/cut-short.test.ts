// The one-shot agent's two nets for a container whose wait never settles (as when its shim was killed before
// its handle existed, before 97192e7: its processes ran on in their cgroup, unseen by SLURM):
// ContainerRunner.killNow discards what is left of a container not reaped within its bound, or not started
// yet; Agent.hostEnding (SIGTERM in --once mode) cuts a stop not finished within the kill grace and a margin
// short (killNow, then discard). The containers are real (the process runtime, their real cgroups); only the
// handle the runner gets is wrapped (lostShims): its wait() never settles and its signals reach nothing. Every
// bound is passed in, small.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { AgentClient } from '../../src/agent/client.js';
import { Journal } from '../../src/agent/journal.js';
import { DEFAULT_SHIPPER_OPTIONS } from '../../src/agent/log-shipper.js';
import { ContainerRunner, type RuntimeChoice } from '../../src/agent/runner.js';
import {
  cgroupsUnusable,
  containerCgroup,
  killCgroup,
  probeCgroups,
} from '../../src/agent/runtimes/cgroup.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { isAlive, processRef, type ProcessRef } from '../../src/agent/runtimes/procfs.js';
import type { ExitInfo, RunHandle, Runtime } from '../../src/agent/runtimes/types.js';
import { silentLogger } from '../../src/log/logger.js';
import { itIf } from '../helpers/needs.js';
import { isRoot } from '../agent/helpers.js';
import { Harness, until } from './harness.js';

const noCgroups = isRoot ? await cgroupsUnusable() : 'not root: creating cgroups needs root';

const ids: string[] = [];
const h = Harness.forFile(ids);

/** Two processes besides the shim: the one the shell left behind too must go. */
const SLEEPERS = ['sh', '-c', 'sleep 600 & exec sleep 600'];

/**
 * Wraps the runtimes a runner uses: each container starts for real, but the runner gets a handle whose wait()
 * never settles and whose signals reach nothing (a lost shim), or (`startHangs`) no handle at all (its start
 * never returns). `events` says, in order: `started` (the real start returned), `wait` (the runner supervises
 * it), each signal sent to it, `discard` (the runtime's discard was called).
 */
function lostShims(inner: RuntimeChoice, startHangs = false) {
  const events: string[] = [];
  const lost = (real: RunHandle): RunHandle => ({
    id: real.id,
    runtime: real.runtime,
    warning: real.warning,
    wait: () => {
      events.push('wait');
      return new Promise<ExitInfo>(() => {});
    },
    signal: async (sig) => void events.push(sig),
    freeze: () => real.freeze(),
    thaw: () => real.thaw(),
    usage: () => real.usage(),
    output: () => real.output(),
  });
  const wrap = (rt: Runtime): Runtime => ({
    name: rt.name,
    available: () => rt.available(),
    reattach: (id, workDir) => rt.reattach(id, workDir),
    discard: async (id, workDir) => {
      events.push('discard');
      await rt.discard(id, workDir);
    },
    start: async (spec) => {
      const real = await rt.start(spec);
      events.push('started');
      return startHangs ? new Promise<RunHandle>(() => {}) : lost(real);
    },
  });
  const choice: RuntimeChoice = {
    pick: (image) => wrap(inner.pick(image)),
    byName: (name) => {
      const rt = inner.byName(name);
      return rt && wrap(rt);
    },
  };
  return { choice, events };
}

/** The container's processes once all of them run (the shim and SLEEPERS' two). */
async function processesOf(id: string): Promise<ProcessRef[]> {
  const group = containerCgroup(await probeCgroups(), id);
  const pids = await until(
    async () => {
      const p = await group.pids();
      return p.length >= 3 && p;
    },
    20_000,
    `the processes of ${id} in its cgroup`,
  );
  return (await Promise.all(pids.map((p) => processRef(p)))).filter((r): r is ProcessRef => r !== null);
}

/** What is left of the container: its live processes, its cgroup's dirs. */
async function leftOf(id: string, refs: ProcessRef[]): Promise<string[]> {
  const left: string[] = [];
  for (const r of refs) if (await isAlive(r)) left.push(`pid ${r.pid}`);
  for (const d of await containerCgroup(await probeCgroups(), id).dirs()) if (existsSync(d)) left.push(d);
  return left;
}

/** `p`'s value, or 'unsettled' when it has not settled within `ms` (a guard: the bounds are far smaller). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'unsettled'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<'unsettled'>((r) => (timer = setTimeout(() => r('unsettled'), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A runner of a one-shot registration's container (started), on the wrapped process runtime. */
async function launched(startHangs: boolean) {
  const node = await h.node();
  const cid = await h.submitAndAssign(node, { command: SLEEPERS });
  ids.push(cid);
  const client = new AgentClient(h.url, node.id);
  const reg = await client.register(node.id, node.secret, {}, cid);
  client.token = reg.token;
  const real = new ProcessRuntime(undefined, { sandbox: 'none' });
  const lost = lostShims(
    { pick: () => real, byName: (n) => (n === real.name ? real : undefined) },
    startHangs,
  );
  const stopper = new AbortController();
  const runner = ContainerRunner.launch(
    {
      client,
      journal: await Journal.load(join(node.workDir, 'journal.json'), { fsync: false }),
      runtimes: lost.choice,
      containersDir: join(node.workDir, 'containers'),
      killGraceMs: 200,
      sampleIntervalMs: 60_000,
      shipper: DEFAULT_SHIPPER_OPTIONS,
      stop: stopper.signal,
      log: silentLogger,
    },
    reg.start![0]!,
  );
  return { cid, runner, events: lost.events, stopper };
}

describe('cut short: nothing of a container whose wait never settles is left', () => {
  itIf(noCgroups)(
    'killNow: a container not reaped within its bound is discarded (its processes killed, its cgroup removed)',
    async () => {
      const { cid, runner, events, stopper } = await launched(false);
      try {
        await until(() => runner.supervised, 20_000, 'the container to be supervised');
        const refs = await processesOf(cid);
        expect(await within(runner.killNow(300), 30_000)).not.toBe('unsettled');
        expect(await leftOf(cid, refs)).toEqual([]);
        expect(events).toEqual(['started', 'wait', 'SIGKILL', 'discard']);
        stopper.abort();
        expect(await within(runner.done, 30_000)).not.toBe('unsettled');
      } finally {
        stopper.abort();
        await killCgroup(containerCgroup(await probeCgroups(), cid)).catch(() => {});
      }
    },
    90_000,
  );

  itIf(noCgroups)(
    'killNow: a container whose start has not returned is discarded (its processes killed, its cgroup removed)',
    async () => {
      const { cid, runner, events, stopper } = await launched(true);
      try {
        await until(() => events.includes('started'), 20_000, 'the container to be started');
        const refs = await processesOf(cid);
        expect(runner.supervised).toBe(false);
        expect(await within(runner.killNow(300), 30_000)).not.toBe('unsettled');
        expect(await leftOf(cid, refs)).toEqual([]);
        expect(events).toEqual(['started', 'discard']);
      } finally {
        stopper.abort();
        await killCgroup(containerCgroup(await probeCgroups(), cid)).catch(() => {});
      }
    },
    90_000,
  );

  itIf(noCgroups)(
    'hostEnding: a stop not finished within kill grace + margin is cut short (SIGKILL, margin, discard) and the agent exits',
    async () => {
      const node = await h.node();
      const cid = await h.submitAndAssign(node, { command: SLEEPERS });
      ids.push(cid);
      let events: string[] = [];
      const { agent, run, lines } = h.startAgent(node, {
        once: cid,
        processSandbox: 'none',
        killGraceMs: 200,
        hostEndingMarginMs: 400,
        wrapRuntimes: (choice) => {
          const lost = lostShims(choice);
          events = lost.events;
          return lost.choice;
        },
      });
      try {
        await until(() => events.includes('wait'), 20_000, 'the container to be supervised');
        const refs = await processesOf(cid);
        agent.hostEnding('SIGTERM: the SLURM job is ending');
        expect(await within(run, 30_000)).toBeNull(); // run() ended, without an error
        expect(await leftOf(cid, refs)).toEqual([]);
        // The supervisor's TERM, its KILL after the grace, then the cut: killNow's KILL, its wait, the discard.
        expect(events).toEqual(['started', 'wait', 'SIGTERM', 'SIGKILL', 'SIGKILL', 'discard']);
        expect(lines).toContain(
          `container ${cid}: SIGTERM: the SLURM job is ending: the container was not stopped within 600 ms; killing it and exiting`,
        );
        expect(existsSync(node.workDir)).toBe(false);
      } finally {
        agent.stop();
        await killCgroup(containerCgroup(await probeCgroups(), cid)).catch(() => {});
      }
    },
    90_000,
  );
});
