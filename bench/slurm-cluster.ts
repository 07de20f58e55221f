// A private SLURM cluster on this machine (munged, slurmctld and one slurmd per node) in a temp dir, for the
// vs-slurm benchmark and the slurm backend's tests. Everything it starts is its own: munged listens on a
// socket in the temp dir, slurmctld and every slurmd on free ports, and the clients find them through
// SLURM_CONF, so a SLURM someone else runs on this machine is neither used nor disturbed.
//
// Several slurmd on one host: each node has its own port, spool dir, pid file and log (`%n` in slurm.conf),
// and runs in its own PID namespace (`unshare --pid --kill-child`), so killNode() ends it together with
// every job process on it, as when a machine dies; a job's process cannot outlive its node.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CGROUP_PARENT, cgroupAt, killCgroup, probeCgroups } from '../src/agent/runtimes/cgroup.js';
import { pollUntil } from './vs-slurm/common.js';

const exec = promisify(execFile);

/** What to install when SLURM is missing (Debian 12 packages; SLURM 22.05). */
export const SLURM_INSTALL = 'apt-get install -y slurmctld slurmd slurm-client munge';

const PROGRAMS = [
  'munged',
  'slurmctld',
  'slurmd',
  'sbatch',
  'squeue',
  'sinfo',
  'scancel',
  'scontrol',
  'runuser',
  'unshare',
];
const PATHS = ['/usr/sbin', '/usr/bin', '/sbin', '/bin', ...(process.env.PATH ?? '').split(':')];

function which(name: string): string | null {
  for (const dir of PATHS) if (dir && existsSync(join(dir, name))) return join(dir, name);
  return null;
}

/** The programs of SLURM (and munge) that are missing here; empty when all are installed. */
export function missingSlurmPrograms(): string[] {
  return PROGRAMS.filter((p) => which(p) === null);
}

/** Why a private cluster cannot start here (not root, programs missing), or null when it can. */
export function slurmUnavailable(): string | null {
  const missing = missingSlurmPrograms();
  if (missing.length > 0) return `SLURM is not installed (missing ${missing.join(', ')}; ${SLURM_INSTALL})`;
  if (process.getuid?.() !== 0) return 'a private SLURM cluster needs root (munged as munge, slurmd)';
  return null;
}

export interface SlurmNodeSpec {
  name: string;
  cpus: number;
  realMemoryMiB: number;
  /** Node features (for --constraint). */
  features?: string[];
  /** Scratch space SLURM offers for --tmp (MiB); default 0. */
  tmpDiskMiB?: number;
}

export interface SlurmOptions {
  nodes: SlurmNodeSpec[];
  /** The `SchedulerParameters=` line's value, or null to leave SLURM's defaults. */
  schedulerParameters: string | null;
  /** How long slurmctld waits for a silent slurmd before it marks the node DOWN (SLURM's default 300 s). */
  slurmdTimeoutS?: number;
  /** How long finished jobs stay listed (SLURM's default 300 s). */
  minJobAgeS?: number;
  /** DefMemPerCPU (MiB) for jobs that give no --mem. */
  defMemPerCpuMiB?: number;
  /** mkdtemp prefix of the cluster's dir. */
  prefix?: string;
}

export interface SlurmCluster {
  dir: string;
  /** The environment that points SLURM's clients at this cluster (SLURM_CONF). */
  env: NodeJS.ProcessEnv;
  partition: string;
  /** `scontrol show config`'s scheduler lines, as SLURM itself reports them. */
  schedulerConfig: string[];
  /** Kills a node like a machine dying: slurmd and every process of its jobs, at once (SIGKILL). */
  killNode(name: string): Promise<void>;
  /** Starts a node's slurmd again (after killNode) and waits until SLURM has it idle or allocated. */
  startNode(name: string): Promise<void>;
  /** The node's state as sinfo reports it (idle, allocated, mixed, down*, …). */
  nodeState(name: string): Promise<string>;
  /** Cancels every job, stops every daemon, removes the dir. */
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res, rej) => srv.listen(0, '127.0.0.1', res).once('error', rej));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

function slurmConf(dir: string, o: SlurmOptions, ctldPort: number, nodePorts: number[]): string {
  return [
    'ClusterName=berthtest',
    'SlurmctldHost=localhost',
    `SlurmctldPort=${ctldPort}`,
    `SlurmdPort=${nodePorts[0]}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    'AuthType=auth/munge',
    `AuthInfo=socket=${dir}/munge/sock`,
    'CredType=cred/munge',
    'MpiDefault=none',
    // The cheapest process tracking and no task plugin, accounting or job completion logging: SLURM's
    // lightest per-job path.
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'JobAcctGatherType=jobacct_gather/none',
    'AccountingStorageType=accounting_storage/none',
    'JobCompType=jobcomp/none',
    'SchedulerType=sched/backfill',
    ...(o.schedulerParameters ? [`SchedulerParameters=${o.schedulerParameters}`] : []),
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_Core_Memory',
    'ReturnToService=2',
    ...(o.slurmdTimeoutS ? [`SlurmdTimeout=${o.slurmdTimeoutS}`] : []),
    `StateSaveLocation=${dir}/state`,
    // %n: every slurmd of this host gets its own spool dir, pid file and log.
    `SlurmdSpoolDir=${dir}/spool/%n`,
    `SlurmctldPidFile=${dir}/slurmctld.pid`,
    `SlurmdPidFile=${dir}/slurmd-%n.pid`,
    `SlurmctldLogFile=${dir}/slurmctld.log`,
    `SlurmdLogFile=${dir}/slurmd-%n.log`,
    `DefMemPerCPU=${o.defMemPerCpuMiB ?? 64}`,
    ...(o.minJobAgeS ? [`MinJobAge=${o.minJobAgeS}`] : []),
    'MailProg=/bin/true',
    ...o.nodes.map(
      (n, i) =>
        `NodeName=${n.name} NodeHostname=localhost NodeAddr=127.0.0.1 Port=${nodePorts[i]} CPUs=${n.cpus} ` +
        `RealMemory=${n.realMemoryMiB} TmpDisk=${n.tmpDiskMiB ?? 0}` +
        (n.features?.length ? ` Feature=${n.features.join(',')}` : '') +
        ' State=UNKNOWN',
    ),
    `PartitionName=main Nodes=${o.nodes.map((n) => n.name).join(',')} Default=YES MaxTime=INFINITE State=UP`,
    '',
  ].join('\n');
}

async function stopChild(child: ChildProcess | null, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  const late = await Promise.race([exited.then(() => false), sleep(graceMs).then(() => true)]);
  if (late) {
    child.kill('SIGKILL');
    await exited;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * SIGSTOPs every process of the PID namespace of `unshare`'s child (a node's slurmd and all its jobs' processes),
 * again until no new one appears, and returns the container cgroups (CGROUP_PARENT/<id>) they are in.
 */
async function stopNodeProcesses(unshare: ChildProcess): Promise<Set<string>> {
  const groups = new Set<string>();
  const pids = await numericDirs('/proc');
  const init = (
    await Promise.all(pids.map(async (p) => ((await parentOf(p)) === unshare.pid ? p : null)))
  ).find((p) => p !== null);
  if (init === undefined) return groups;
  const ns = await readlink(`/proc/${init}/ns/pid`).catch(() => null);
  if (ns === null) return groups;
  const stopped = new Set<number>();
  for (;;) {
    const inNs: number[] = [];
    for (const p of await numericDirs('/proc')) {
      if (!stopped.has(p) && (await readlink(`/proc/${p}/ns/pid`).catch(() => null)) === ns) inNs.push(p);
    }
    if (inNs.length === 0) return groups;
    for (const p of inNs) {
      stopped.add(p);
      try {
        process.kill(p, 'SIGSTOP');
      } catch {
        continue; // gone already
      }
      const lines = (await readFile(`/proc/${p}/cgroup`, 'utf8').catch(() => '')).split('\n');
      for (const line of lines) {
        const m = new RegExp(`^[^:]*:[^:]*:/(${CGROUP_PARENT}/[^/]+)$`).exec(line);
        if (m) groups.add(m[1]!);
      }
    }
  }
}

async function numericDirs(dir: string): Promise<number[]> {
  return (await readdir(dir)).filter((n) => /^\d+$/.test(n)).map(Number);
}

/** A process's parent pid (from /proc/PID/stat; the command may hold spaces and parentheses). */
async function parentOf(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** Starts munged, slurmctld and the nodes' slurmd in a temp dir and waits for every node to be idle. */
export async function startSlurm(o: SlurmOptions): Promise<SlurmCluster> {
  if (o.nodes.length === 0) throw new Error('startSlurm: at least one node');
  const dir = await mkdtemp(join(tmpdir(), o.prefix ?? 'berth-slurm-'));
  let munged: number | null = null;
  let ctld: ChildProcess | null = null;
  const slurmds = new Map<string, ChildProcess>();
  const env = { ...process.env, SLURM_CONF: join(dir, 'slurm.conf') };
  const daemon = (cmd: string, args: string[]) => {
    const child = spawn(which(cmd)!, args, { env, stdio: ['ignore', 'ignore', 'ignore'] });
    child.once('error', () => {});
    return child;
  };
  const startSlurmd = (name: string) => {
    // unshare ignores SIGTERM while it waits; SIGKILL of unshare ends the namespace (--kill-child).
    slurmds.set(
      name,
      daemon('unshare', [
        '--pid',
        '--fork',
        '--kill-child',
        '--mount-proc',
        which('slurmd')!,
        '-D',
        '-N',
        name,
      ]),
    );
  };
  const nodeState = async (name: string) =>
    (await exec('sinfo', ['-h', '-n', name, '-o', '%T'], { env })).stdout.trim();
  /** Each node's state and reason (sinfo %T, %E). */
  const states = async () => {
    const r = await exec('sinfo', ['-h', '-N', '-o', '%N|%T|%E'], { env }).catch(() => null);
    return new Map(
      (r?.stdout.trim().split('\n') ?? []).map((l) => {
        const [n, st, why] = l.split('|');
        return [n!, { state: st ?? '', reason: why ?? '' }] as const;
      }),
    );
  };
  /** Up: responding (no `*`), and idle, allocated, mixed or completing (jobs of before being cleaned up). */
  const isUp = (state: string) => /^(idle|allocated|mixed|completing)$/.test(state);
  const waitUp = async (names: string[], timeoutMs: number) => {
    const started = Date.now();
    let resumed = false;
    await pollUntil(async () => {
      if (ctld!.exitCode !== null) throw new Error(`slurmctld exited; see ${dir}/slurmctld.log`);
      for (const n of names)
        if (slurmds.get(n)!.exitCode !== null)
          throw new Error(`slurmd ${n} exited; see ${dir}/slurmd-${n}.log`);
      const now = await states();
      const down = names.filter((n) => !isUp(now.get(n)?.state ?? ''));
      // ReturnToService=2 brings a node back when its slurmd registers; one still down or drained after
      // 10 s is resumed, as an administrator would after a crash.
      if (down.length > 0 && !resumed && Date.now() - started > 10_000) {
        resumed = true;
        await exec('scontrol', ['update', `nodename=${down.join(',')}`, 'state=resume'], { env }).catch(
          () => {},
        );
      }
      return down.length === 0;
    }, timeoutMs).catch(async (err: Error) => {
      const now = await states();
      const detail = names
        .map((n) => `${n}: ${now.get(n)?.state ?? '?'} (${now.get(n)?.reason ?? ''})`)
        .join(', ');
      throw new Error(
        `SLURM nodes did not come up in ${timeoutMs} ms (${detail}; see ${dir}): ${err.message}`,
      );
    });
  };
  const stop = async () => {
    // Jobs first, so that no slurmstepd outlives its slurmd.
    if (ctld && ctld.exitCode === null) {
      await exec('scancel', ['--quiet', '--partition', 'main'], { env }).catch(() => {});
      await pollUntil(
        async () => (await exec('squeue', ['-h', '-o', '%i'], { env })).stdout.trim() === '',
        10_000,
      ).catch(() => {});
    }
    for (const child of slurmds.values()) await stopChild(child, 'SIGKILL', 5000);
    await stopChild(ctld, 'SIGTERM', 5000);
    if (munged !== null) {
      try {
        process.kill(munged, 'SIGTERM');
        const pid = munged;
        await pollUntil(async () => !existsSync(`/proc/${pid}`), 5000).catch(() => {});
      } catch {
        // already gone
      }
    }
    // BERTH_KEEP_SLURM=1 keeps the dir (logs, slurm.conf) to look at after a failure.
    if (!process.env.BERTH_KEEP_SLURM) await rm(dir, { recursive: true, force: true });
  };
  try {
    // munged runs as `munge` and wants every directory above its socket searchable.
    await chmod(dir, 0o711);
    for (const d of ['munge', 'state', 'spool', 'out']) await mkdir(join(dir, d));
    for (const n of o.nodes) await mkdir(join(dir, 'spool', n.name));
    const uid = Number((await exec('id', ['-u', 'munge'])).stdout.trim());
    const gid = Number((await exec('id', ['-g', 'munge'])).stdout.trim());
    await chown(join(dir, 'munge'), uid, gid);
    await chmod(join(dir, 'munge'), 0o711);
    await exec('runuser', [
      '-u',
      'munge',
      '--',
      which('munged')!,
      `--socket=${dir}/munge/sock`,
      `--pid-file=${dir}/munge/pid`,
      `--log-file=${dir}/munge/log`,
      `--seed-file=${dir}/munge/seed`,
    ]);
    munged = Number((await readFile(join(dir, 'munge', 'pid'), 'utf8')).trim());
    const ctldPort = await freePort();
    const nodePorts: number[] = [];
    for (let i = 0; i < o.nodes.length; i++) nodePorts.push(await freePort());
    await writeFile(join(dir, 'slurm.conf'), slurmConf(dir, o, ctldPort, nodePorts));
    ctld = daemon('slurmctld', ['-D', '-i']);
    for (const n of o.nodes) startSlurmd(n.name);
    await waitUp(
      o.nodes.map((n) => n.name),
      30_000,
    );
    const config = (await exec('scontrol', ['show', 'config'], { env })).stdout
      .split('\n')
      .filter((l) => /^(SchedulerParameters|SchedulerType|SelectType\b|MinJobAge|ProctrackType)/.test(l))
      .map((l) => l.replace(/\s+=\s+/, '='));
    return {
      dir,
      env,
      partition: 'main',
      schedulerConfig: config,
      nodeState,
      async killNode(name) {
        const child = slurmds.get(name);
        if (!child) throw new Error(`no node ${name}`);
        // A dead machine takes its containers' cgroups with it; this host keeps them: the node's processes
        // are stopped (nothing new starts), their container groups read, and removed once all are killed.
        const groups = await stopNodeProcesses(child);
        await stopChild(child, 'SIGKILL', 5000);
        const host = await probeCgroups();
        for (const g of groups) await killCgroup(cgroupAt(host, g));
      },
      async startNode(name) {
        const child = slurmds.get(name);
        if (!child) throw new Error(`no node ${name}`);
        if (child.exitCode === null && child.signalCode === null) throw new Error(`node ${name} is running`);
        startSlurmd(name);
        await waitUp([name], 60_000);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
