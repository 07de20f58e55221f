// SLURM's client commands (sbatch, squeue, scancel, scontrol), which every site has, run as child
// processes with a time limit. Failures are typed: SlurmCommandError carries the command and its stderr;
// sbatch's refusals are classified once, in sbatch.ts.
import { spawn } from 'node:child_process';
import { slurmCommand, type SlurmConfig } from './config.js';
import { classifySbatchError, parseJobId, submitEnvironment, type SbatchFailure } from './sbatch.js';
import { parseSqueue, squeueArgs, type SlurmJob, type SqueueSelect } from './squeue.js';

/** A SLURM command could not be run or failed. */
export class SlurmCommandError extends Error {
  override name = 'SlurmCommandError';
  constructor(
    readonly command: string,
    readonly code: number | null,
    readonly stderr: string,
    message: string,
  ) {
    super(message);
  }
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Most job ids in one scancel or scontrol call (keeps command lines short). */
const IDS_PER_CALL = 200;

export class SlurmCommands {
  constructor(
    private readonly cfg: Pick<SlurmConfig, 'slurmBin' | 'commandTimeoutMs' | 'agentEnv'>,
    /** The environment of the commands (SLURM_CONF and the like); default this process's. */
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** This user's jobs that squeue lists: the live ones, or the named ones in any state (squeue.ts). */
  async squeue(select: SqueueSelect = 'live'): Promise<{ jobs: SlurmJob[]; bad: string[] }> {
    const r = await this.must('squeue', squeueArgs(select));
    return parseSqueue(r.stdout);
  }

  /**
   * Submits a batch script (on sbatch's stdin). SLURM's refusal is a value (nothing was submitted); a
   * SlurmCommandError means the outcome is unknown (no answer in time, unreadable answer): the job may
   * exist, and is found by its name later.
   */
  async sbatch(
    args: string[],
    script: string,
  ): Promise<{ ok: true; jobId: string } | { ok: false; failure: SbatchFailure }> {
    const r = await this.run('sbatch', args, script, submitEnvironment(this.env, this.cfg.agentEnv));
    if (r.code === 0) {
      const jobId = parseJobId(r.stdout);
      if (jobId) return { ok: true, jobId };
      throw new SlurmCommandError(
        'sbatch',
        0,
        r.stderr,
        `unexpected sbatch output ${JSON.stringify(r.stdout)}`,
      );
    }
    return { ok: false, failure: classifySbatchError(r.stderr || `sbatch exited with code ${r.code}`) };
  }

  /** Cancels jobs (pending ones leave the queue; running ones get SIGTERM, then SIGKILL after KillWait). */
  async scancel(jobIds: string[]): Promise<void> {
    for (let i = 0; i < jobIds.length; i += IDS_PER_CALL)
      await this.must('scancel', jobIds.slice(i, i + IDS_PER_CALL));
  }

  /** Lets held jobs be scheduled again. */
  async release(jobIds: string[]): Promise<void> {
    for (let i = 0; i < jobIds.length; i += IDS_PER_CALL)
      await this.must('scontrol', ['release', jobIds.slice(i, i + IDS_PER_CALL).join(',')]);
  }

  /** Sets the nice value of pending jobs. */
  async renice(jobIds: string[], nice: number): Promise<void> {
    for (let i = 0; i < jobIds.length; i += IDS_PER_CALL)
      await this.must('scontrol', [
        'update',
        `JobId=${jobIds.slice(i, i + IDS_PER_CALL).join(',')}`,
        `Nice=${nice}`,
      ]);
  }

  private async must(name: string, args: string[]): Promise<RunResult> {
    const r = await this.run(name, args);
    if (r.code !== 0) {
      const err = r.stderr.trim().split('\n').slice(-3).join('; ');
      throw new SlurmCommandError(
        name,
        r.code,
        r.stderr,
        `${name} failed (exit ${r.code}): ${err || 'no message'}`,
      );
    }
    return r;
  }

  private run(name: string, args: string[], input?: string, env?: NodeJS.ProcessEnv): Promise<RunResult> {
    const cmd = slurmCommand(this.cfg, name);
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, args, { env: env ?? this.env, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, this.cfg.commandTimeoutMs);
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.stdin.on('error', () => {}); // a command that exits without reading its stdin
      child.once('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(
          new SlurmCommandError(
            name,
            null,
            '',
            err.code === 'ENOENT'
              ? `${cmd}: not found (install SLURM's client commands, or set slurm_bin)`
              : `${cmd}: ${err.message}`,
          ),
        );
      });
      child.once('close', (code) => {
        clearTimeout(timer);
        if (timedOut)
          reject(
            new SlurmCommandError(
              name,
              null,
              stderr,
              `${name} did not answer within ${this.cfg.commandTimeoutMs} ms`,
            ),
          );
        else resolve({ code, stdout, stderr });
      });
      child.stdin.end(input ?? '');
    });
  }
}
