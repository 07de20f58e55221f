// The guest's half of a CRIU migration through the whole chain (issue 16), once per runtime that saves
// whole states (CRIU_MIGRATIONS: `process` with `process_criu`, sandbox none; `runc` with `runc_criu`, the
// host's network): two agents on that runtime, both in this guest (the only place criu works), talking to a
// real API server with its PostgreSQL on the host (cgroup-v2.test.ts starts them; the guest reaches the
// host's loopback as 10.0.2.2 through QEMU's user network). The host submits an opportunistic counter,
// assigns it to A, pauses it once it counted a little, and assigns its retry to B (criu-migrate-host.ts,
// which also checks the outcome in the store). Here: the agents run, and once the counter is paused (frozen,
// as a reclaim freezes it) a neighbour in A's instance group grows into the memory it borrowed, so that A's
// pressure watcher reclaims it: saved whole by criu, sent to the API as its checkpoint; B's agent downloads
// it and resumes it where it stood. Done when B reports the retry's exit 0; failed at once when the host's
// half failed (it says so on its status address); everything this started (agents, the neighbour, the
// instance groups, their processes, the temp dir) is gone whatever happened.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Agent, type AgentOptions } from '../../src/agent/agent.js';
import { cgroupAt, probeCgroups, type Cgroup } from '../../src/agent/runtimes/cgroup.js';
import { createLogger } from '../../src/log/logger.js';
import type { Measured } from '../agent/cases.js';
import { TEST_ROOTFS_TAR, waitFor } from '../agent/helpers.js';
import { GROW } from '../agent/pressure-cases.js';
import { GUEST_DATA } from '../helpers/guest.js';

/** One runtime's migration: what its agents are given and what differs in its counter. */
export interface CriuMigrationKind {
  /** The runtime (also the key of its setup, and its path on the host's status address). */
  runtime: 'process' | 'runc';
  /** The case id (plan.ts). */
  name: string;
  /** The agents' options beyond the common ones. */
  agent: Partial<AgentOptions>;
  /** The agent's line saying that it saves this runtime's containers whole. */
  ready: RegExp;
  /** The counter's image as the guest sees it (null: image-less). */
  image: string | null;
}

export const CRIU_MIGRATE_CASE =
  'criu: through the API, an opportunistic process container reclaimed on agent A is saved whole, sent up, and resumed whole on agent B';
export const CRIU_MIGRATE_RUNC_CASE =
  'criu: through the API, an opportunistic runc container reclaimed on agent A is saved whole (runc checkpoint), sent up, and resumed whole on agent B (runc restore)';

export const CRIU_MIGRATIONS: readonly CriuMigrationKind[] = [
  {
    runtime: 'process',
    name: CRIU_MIGRATE_CASE,
    agent: { runtime: 'process', processSandbox: 'none', processCriu: 'criu' },
    ready: /^CRIU whole state: /,
    image: null,
  },
  {
    runtime: 'runc',
    name: CRIU_MIGRATE_RUNC_CASE,
    // runc whole state only in the host's network (RUNC_CRIU_NETWORK, runc.ts).
    agent: { runtime: 'runc', runcCriu: 'criu', containerNetwork: 'host', processSandbox: 'none' },
    ready: /^runc CRIU whole state: /,
    // The tarball cgroup-v2.test.ts puts on the guest's data disk.
    image: join(GUEST_DATA, basename(TEST_ROOTFS_TAR)),
  },
];

/** The setup the host writes into the guest's data disk (as this file name) for these cases. */
export const CRIU_MIGRATE_FILE = 'criu-migrate.json';
export interface CriuMigrateSetup {
  /** The API as the guest reaches it. */
  apiUrl: string;
  /** The host's status address: GET <statusUrl><runtime> answers once that runtime's host half ended. */
  statusUrl: string;
  /** Per runtime: agent A's node, then agent B's, and the opportunistic counter the host assigned to A. */
  runs: Record<string, { nodes: { id: string; secret: string }[]; container: string }>;
}

/** The host's answer on its status address when its half failed (then the error). */
export const HOST_FAILED = 'failed\n';

const MiB = 1024 * 1024;
/** A's instance: pressure once its containers use over INSTANCE_RAM - HEADROOM; the neighbour takes more. */
const INSTANCE_RAM = 256 * MiB;
const HEADROOM = 64 * MiB;
/** Each wait under emulation (the guest's whole run is bounded by the host too). */
const WAIT_MS = 120_000;

/**
 * Asks the host how its half of `runtime`'s case ended: the answer comes once it ended. Calls `failed`
 * with the host's error if it failed (or if the host cannot be asked); returns the request's abort.
 */
function watchHost(url: string, failed: (error: string) => void): () => void {
  const req = get(url, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (body += d));
    res.on('end', () => {
      if (body.startsWith(HOST_FAILED)) failed(body.slice(HOST_FAILED.length));
    });
  });
  req.on('error', (err) => failed(`its status at ${url} could not be read: ${err.message}`));
  return () => {
    req.removeAllListeners('error').on('error', () => {});
    req.destroy();
  };
}

export async function criuMigrateCase(kind: CriuMigrationKind, setup: CriuMigrateSetup): Promise<Measured> {
  const run = setup.runs[kind.runtime];
  if (!run) throw new Error(`the host's setup has no ${kind.runtime} migration`);
  const dir = await mkdtemp(join(tmpdir(), 'berth-criu-migrate-'));
  const host = await probeCgroups();
  const groups: Cgroup[] = [];
  const agents: { agent: Agent; run: Promise<unknown> }[] = [];
  let neighbour: ChildProcess | null = null;
  const lines: string[][] = [];
  /** When each line of `lines` was logged (performance.now()). */
  const times: number[][] = [];
  let hostError: string | null = null;
  const stopWatching = watchHost(`${setup.statusUrl}${kind.runtime}`, (e) => (hostError = e));
  /** The first line of agent i's log that `re` matches, and when it was logged. */
  const find = (i: number, re: RegExp): { m: RegExpExecArray; at: number } | null => {
    for (const [k, l] of lines[i]!.entries()) {
      const m = re.exec(l);
      if (m) return { m, at: times[i]![k]! };
    }
    return null;
  };
  const seen = (i: number, re: RegExp) => find(i, re)?.m ?? null;
  const waitLine = (i: number, re: RegExp, what: string) =>
    waitFor(
      async () => {
        if (hostError !== null)
          throw new Error(`the host's half failed while waiting for ${what}: ${hostError}`);
        return seen(i, re) !== null;
      },
      WAIT_MS,
      what,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; agent ${'AB'[i]}'s log:\n${lines[i]!.slice(-30).join('\n')}`);
    });
  try {
    if (!existsSync('/sys/class/net/eth0'))
      throw new Error(
        'no eth0: QEMU gave no NIC, or the guest predates virtio_net in its initramfs (scripts/guest/build.sh test)',
      );
    const [a, b] = run.nodes as [{ id: string; secret: string }, { id: string; secret: string }];
    const tag = randomBytes(3).toString('hex');
    const start = async (i: number, node: { id: string; secret: string }, over: Partial<AgentOptions>) => {
      const home = join(dir, 'AB'[i]!);
      await mkdir(home, { mode: 0o700 });
      const secretFile = join(home, 'bootstrap-secret');
      await writeFile(secretFile, node.secret, { mode: 0o600 });
      const group = cgroupAt(host, `berth-criu-mig-${'ab'[i]}-${tag}`);
      await group.create({ vcpus: 2, ram: 4096 * MiB });
      groups.push(group);
      const log: string[] = [];
      const at: number[] = [];
      lines[i] = log;
      times[i] = at;
      const logger = createLogger({
        name: `agent ${'AB'[i]}`,
        level: 'debug',
        destination: {
          write: (json: string) => {
            const e = JSON.parse(json) as { msg: string; container?: string };
            log.push(`${e.container ? `container ${e.container}: ` : ''}${e.msg}`);
            at.push(performance.now());
          },
        },
      });
      const agent = new Agent({
        apiUrl: setup.apiUrl,
        nodeId: node.id,
        bootstrapSecretFile: secretFile,
        workDir: join(home, 'work'),
        cgroupParent: group.path,
        killGraceMs: 1000,
        pingWaitMs: 2000,
        sampleIntervalMs: 1000,
        logger,
        ...kind.agent,
        ...over,
      });
      agents.push({
        agent,
        run: agent.run().catch((err: Error) => log.push(`agent.run failed: ${err.message}`)),
      });
      return group;
    };
    const pa = await start(0, a, {
      pressure: {
        intervalMs: 50,
        headroomBytes: HEADROOM,
        psiPercent: null,
        cpuPercent: null,
        instanceRam: INSTANCE_RAM,
      },
    });
    await start(1, b, { pressure: { psiPercent: null, cpuPercent: null, instanceRam: null } });
    await waitLine(0, kind.ready, "agent A's whole state");
    await waitLine(1, kind.ready, "agent B's whole state");
    // The host pauses the counter once it counted a little: it stops well before its end on any speed.
    const opp = run.container;
    await waitLine(0, new RegExp(`^container ${opp}: paused: frozen`), 'the counter paused on A');
    // The guaranteed neighbour: a group in A's instance group holding 8 × 32 MiB (touched).
    const ng = cgroupAt(host, `${pa.path}/neighbour`);
    await ng.create({ vcpus: 1, ram: 4096 * MiB });
    const joinGroup = ng
      .procsFiles()
      .map((f) => `echo $$ > ${f}`)
      .join('; ');
    const t0 = performance.now();
    neighbour = spawn('sh', ['-c', `${joinGroup}; ${GROW.replace('8M', '32M').repeat(8)} wait`], {
      stdio: 'ignore',
    });
    await waitLine(0, new RegExp(`reclaimed ${opp}`), 'A to reclaim the counter');
    const reclaimMs = Math.round(performance.now() - t0);
    await ng.killAll(10_000);
    neighbour = null;
    const exited = /^container (\S+): exited 0/;
    await waitLine(1, exited, "B to report its retry's exit 0");
    const retry = seen(1, exited)![1]!;
    // From the freeze on A (its reclaim line) to B's order for the retry (its download and restore follow:
    // their times are in the retry's log, which the host reads).
    const starting = find(1, new RegExp(`^container ${retry}: starting$`));
    if (!starting) throw new Error(`no "starting" line for ${retry} in B's log:\n${lines[1]!.join('\n')}`);
    const handoverMs = Math.round(starting.at - find(0, new RegExp(`reclaimed ${opp}`))!.at);
    return { reclaimMs, retry, handoverMs };
  } finally {
    stopWatching();
    neighbour?.kill('SIGKILL');
    for (const x of agents) x.agent.stop();
    await Promise.all(agents.map((x) => x.run));
    // Whatever is still running in the instances' groups (a container of a failed run) goes with them.
    for (const g of groups.reverse()) {
      await g.killAll(10_000).catch(() => {});
      await g.remove(10_000).catch(() => {});
    }
    await rm(dir, { recursive: true, force: true });
  }
}
