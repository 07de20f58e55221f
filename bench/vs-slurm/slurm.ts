// The SLURM side of `bench vs-slurm`: a private one-node SLURM cluster (munged, slurmctld, slurmd) in a
// temp dir, and N one-CPU batch jobs through it. Everything it starts is its own: munged listens on a
// socket in the temp dir, slurmctld and slurmd on free ports, and the clients find them through
// SLURM_CONF, so a SLURM someone else runs on this machine is neither used nor disturbed.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pollUntil, runPool, type SideResult } from './common.js';

const exec = promisify(execFile);

/** What to install when SLURM is missing (Debian 12 packages; SLURM 22.05). */
export const SLURM_INSTALL = 'apt-get install -y slurmctld slurmd slurm-client munge';

const PROGRAMS = ['munged', 'slurmctld', 'slurmd', 'sbatch', 'squeue', 'sinfo', 'scancel', 'runuser'];
const PATHS = ['/usr/sbin', '/usr/bin', '/sbin', '/bin', ...(process.env.PATH ?? '').split(':')];

function which(name: string): string | null {
  for (const dir of PATHS) if (dir && existsSync(join(dir, name))) return join(dir, name);
  return null;
}

/** The programs of SLURM (and munge) that are missing here; empty when all are installed. */
export function missingSlurmPrograms(): string[] {
  return PROGRAMS.filter((p) => which(p) === null);
}

export interface SlurmOptions {
  cpus: number;
  realMemoryMiB: number;
  /** The `SchedulerParameters=` line's value, or null to leave SLURM's defaults. */
  schedulerParameters: string | null;
  say: (line: string) => void;
}

export interface SlurmCluster {
  dir: string;
  env: NodeJS.ProcessEnv;
  /** `scontrol show config`'s scheduler lines, as SLURM itself reports them. */
  schedulerConfig: string[];
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res, rej) => srv.listen(0, '127.0.0.1', res).once('error', rej));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

function slurmConf(dir: string, o: SlurmOptions, ports: [number, number]): string {
  return [
    'ClusterName=vsslurm',
    'SlurmctldHost=localhost',
    `SlurmctldPort=${ports[0]}`,
    `SlurmdPort=${ports[1]}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    'AuthType=auth/munge',
    `AuthInfo=socket=${dir}/munge/sock`,
    'CredType=cred/munge',
    'MpiDefault=none',
    // The cheapest process tracking and no task plugin, accounting or job completion logging: SLURM's
    // lightest per-job path (Berth's process runtime does put each container in a cgroup).
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
    `StateSaveLocation=${dir}/state`,
    `SlurmdSpoolDir=${dir}/spool`,
    `SlurmctldPidFile=${dir}/slurmctld.pid`,
    `SlurmdPidFile=${dir}/slurmd.pid`,
    `SlurmctldLogFile=${dir}/slurmctld.log`,
    `SlurmdLogFile=${dir}/slurmd.log`,
    'DefMemPerCPU=64',
    // Finished jobs stay listed (default 300 s): a run of 1,000 jobs outlasts that, and the latencies are
    // read from these records at the end. Bookkeeping only; the scheduler looks at pending jobs.
    'MinJobAge=3600',
    'MailProg=/bin/true',
    `NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=${o.cpus} RealMemory=${o.realMemoryMiB} State=UNKNOWN`,
    'PartitionName=main Nodes=node1 Default=YES MaxTime=INFINITE State=UP',
    '',
  ].join('\n');
}

async function stopChild(child: ChildProcess | null, graceMs: number): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const late = await Promise.race([exited.then(() => false), sleep(graceMs).then(() => true)]);
  if (late) {
    child.kill('SIGKILL');
    await exited;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts munged, slurmctld and slurmd in a temp dir and waits for the node to be idle. */
export async function startSlurm(o: SlurmOptions): Promise<SlurmCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-vs-slurm-'));
  let munged: number | null = null;
  let ctld: ChildProcess | null = null;
  let slurmd: ChildProcess | null = null;
  const env = { ...process.env, SLURM_CONF: join(dir, 'slurm.conf') };
  const stop = async () => {
    // Jobs first, so that no slurmstepd outlives its slurmd.
    if (ctld && ctld.exitCode === null) {
      await exec('scancel', ['--quiet', '--partition', 'main'], { env }).catch(() => {});
      await pollUntil(
        async () => (await exec('squeue', ['-h', '-o', '%i'], { env })).stdout.trim() === '',
        5000,
      ).catch(() => {});
    }
    await stopChild(slurmd, 5000);
    await stopChild(ctld, 5000);
    if (munged !== null) {
      try {
        process.kill(munged, 'SIGTERM');
        await pollUntil(async () => !existsSync(`/proc/${munged}`), 5000).catch(() => {});
      } catch {
        // already gone
      }
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    // munged runs as `munge` and wants every directory above its socket searchable.
    await chmod(dir, 0o711);
    for (const d of ['munge', 'state', 'spool', 'out']) await mkdir(join(dir, d));
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
    await writeFile(join(dir, 'slurm.conf'), slurmConf(dir, o, [await freePort(), await freePort()]));
    const daemon = (cmd: string, args: string[]) => {
      const child = spawn(which(cmd)!, args, { env, stdio: ['ignore', 'ignore', 'ignore'] });
      child.once('error', () => {});
      return child;
    };
    ctld = daemon('slurmctld', ['-D', '-i']);
    slurmd = daemon('slurmd', ['-D', '-N', 'node1']);
    await pollUntil(async () => {
      if (ctld!.exitCode !== null || slurmd!.exitCode !== null)
        throw new Error(`a SLURM daemon exited at start; see ${dir}/slurmctld.log and slurmd.log`);
      const r = await exec('sinfo', ['-h', '-n', 'node1', '-o', '%T'], { env }).catch(() => null);
      return r?.stdout.trim() === 'idle';
    }, 30_000).catch((err: Error) => {
      throw new Error(`the SLURM node did not become idle in 30 s: ${err.message}`);
    });
    const config = (await exec('scontrol', ['show', 'config'], { env })).stdout
      .split('\n')
      .filter((l) => /^(SchedulerParameters|SchedulerType|SelectType\b|MinJobAge|ProctrackType)/.test(l))
      .map((l) => l.replace(/\s+=\s+/, '='));
    return { dir, env, schedulerConfig: config, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

interface SqueueJob {
  job_id: number;
  job_state: string;
  exit_code: number;
  submit_time: number;
  start_time: number;
  end_time: number;
}

/** Submits `jobs` batch jobs (one sbatch call each, `concurrency` at a time) and waits for them all. */
export async function runSlurmJobs(
  c: SlurmCluster,
  o: { jobs: number; concurrency: number; command: string[]; ramMiB: number },
): Promise<SideResult> {
  const wrap = o.command.join(' ');
  const args = [
    '--parsable',
    '--ntasks=1',
    '--cpus-per-task=1',
    `--mem=${o.ramMiB}M`,
    `--chdir=${c.dir}/out`,
    `--output=${c.dir}/out/%j.out`,
    `--wrap=${wrap}`,
  ];
  const ids: number[] = [];
  const t0 = performance.now();
  await runPool(o.jobs, o.concurrency, async () => {
    const r = await exec('sbatch', args, { env: c.env });
    ids.push(Number(r.stdout.trim().split(';')[0]));
  });
  const submitted = performance.now();
  // Finished = no longer pending or running (COMPLETING is the node's cleanup after the job ended).
  await pollUntil(
    async () =>
      (await exec('squeue', ['-h', '-t', 'PD,CF,R', '-o', '%i'], { env: c.env })).stdout.trim() === '',
    24 * 3600_000,
    100,
  );
  const done = performance.now();
  const { stdout } = await exec('squeue', ['--json', '--states=all'], {
    env: c.env,
    maxBuffer: 1 << 30,
  });
  const mine = new Set(ids);
  const jobs = (JSON.parse(stdout) as { jobs: SqueueJob[] }).jobs.filter((j) => mine.has(j.job_id));
  const ok = jobs.filter((j) => j.job_state === 'COMPLETED' && j.exit_code === 0);
  return {
    jobs: o.jobs,
    recorded: jobs.length,
    succeeded: ok.length,
    submitSeconds: (submitted - t0) / 1000,
    makespanSeconds: (done - t0) / 1000,
    // SLURM keeps whole seconds: each latency is off by up to ±1 s.
    submitToStartMs: jobs.filter((j) => j.start_time > 0).map((j) => (j.start_time - j.submit_time) * 1000),
    runMs: jobs.filter((j) => j.end_time > 0).map((j) => (j.end_time - j.start_time) * 1000),
    maxRunning: null,
  };
}
