// The guest's half of a CRIU migration through the whole chain (issue 16): two agents on the process runtime
// with `process_criu` (sandbox none), both in this guest (the only place criu works), talking to a real API
// server with its PostgreSQL on the host (cgroup-v2.test.ts starts them; the guest reaches the host's
// loopback as 10.0.2.2 through QEMU's user network). The host submits an opportunistic counter, assigns it
// to A, pauses it once it counted a little, and assigns its retry to B (criu-migrate-host.ts, which also
// checks the outcome in the store). Here: the agents run, and once the counter is paused (frozen, as a
// reclaim freezes it) a neighbour in A's instance group grows into the memory it borrowed, so that A's
// pressure watcher reclaims it: saved whole by criu, sent to the API as its checkpoint; B's agent downloads
// it and resumes the tree where it stood. Done when B reports the retry's exit 0; everything this started
// (agents, the neighbour, the instance groups, their processes, the temp dir) is gone whatever happened.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, type AgentOptions } from '../../src/agent/agent.js';
import { cgroupAt, probeCgroups, type Cgroup } from '../../src/agent/runtimes/cgroup.js';
import { createLogger } from '../../src/log/logger.js';
import type { Measured } from '../agent/cases.js';
import { waitFor } from '../agent/helpers.js';
import { GROW } from '../agent/pressure-cases.js';

export const CRIU_MIGRATE_CASE =
  'criu: through the API, an opportunistic process container reclaimed on agent A is saved whole, sent up, and resumed whole on agent B';

/** The setup the host writes into the guest's data disk (as this file name) for this case. */
export const CRIU_MIGRATE_FILE = 'criu-migrate.json';
export interface CriuMigrateSetup {
  /** The API as the guest reaches it. */
  apiUrl: string;
  /** Agent A's node, then agent B's. */
  nodes: { id: string; secret: string }[];
  /** The opportunistic counter the host assigned to A. */
  container: string;
}

const MiB = 1024 * 1024;
/** A's instance: pressure once its containers use over INSTANCE_RAM - HEADROOM; the neighbour takes more. */
const INSTANCE_RAM = 256 * MiB;
const HEADROOM = 64 * MiB;
/** Each wait under emulation (the guest's whole run is bounded by the host too). */
const WAIT_MS = 120_000;

export async function criuMigrateCase(setup: CriuMigrateSetup): Promise<Measured> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-criu-migrate-'));
  const host = await probeCgroups();
  const groups: Cgroup[] = [];
  const agents: { agent: Agent; run: Promise<unknown> }[] = [];
  let neighbour: ChildProcess | null = null;
  const lines: string[][] = [];
  const seen = (i: number, re: RegExp): RegExpExecArray | null => {
    for (const l of lines[i]!) {
      const m = re.exec(l);
      if (m) return m;
    }
    return null;
  };
  const waitLine = (i: number, re: RegExp, what: string) =>
    waitFor(async () => seen(i, re) !== null, WAIT_MS, what).catch((err: Error) => {
      throw new Error(`${err.message}; agent ${'AB'[i]}'s log:\n${lines[i]!.slice(-30).join('\n')}`);
    });
  try {
    if (!existsSync('/sys/class/net/eth0'))
      throw new Error(
        'no eth0: QEMU gave no NIC, or the guest predates virtio_net in its initramfs (scripts/guest/build.sh test)',
      );
    const [a, b] = setup.nodes as [CriuMigrateSetup['nodes'][0], CriuMigrateSetup['nodes'][0]];
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
      lines[i] = log;
      const logger = createLogger({
        name: `agent ${'AB'[i]}`,
        level: 'debug',
        destination: {
          write: (json: string) => {
            const e = JSON.parse(json) as { msg: string; container?: string };
            log.push(`${e.container ? `container ${e.container}: ` : ''}${e.msg}`);
          },
        },
      });
      const agent = new Agent({
        apiUrl: setup.apiUrl,
        nodeId: node.id,
        bootstrapSecretFile: secretFile,
        workDir: join(home, 'work'),
        runtime: 'process',
        processSandbox: 'none',
        processCriu: 'criu',
        cgroupParent: group.path,
        killGraceMs: 1000,
        pingWaitMs: 2000,
        sampleIntervalMs: 1000,
        logger,
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
    await waitLine(0, /^CRIU whole state: /, "agent A's CRIU whole state");
    await waitLine(1, /^CRIU whole state: /, "agent B's CRIU whole state");
    // The host pauses the counter once it counted a little: it stops well before its end on any speed.
    const opp = setup.container;
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
    const done = await waitLine(1, /^container (\S+): exited 0/, "B to report its retry's exit 0").then(() =>
      seen(1, /^container (\S+): exited 0/),
    );
    return { reclaimMs, retry: done![1]! };
  } finally {
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
