// Reading `squeue`: this dispatcher's jobs with the fields the backend acts on. Pure: the command's
// arguments, and its output parsed into records (tested against real output in the unit tests).

/** One SLURM job as squeue lists it. */
export interface SlurmJob {
  /** SLURM's job id. */
  id: string;
  /** The job name: the container id (the only link between the two systems). */
  name: string;
  /** PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, NODE_FAIL, TIMEOUT, … */
  state: string;
  /** Why it waits (PENDING) or how it ended (%r): Priority, Resources, BadConstraints, NodeDown, … */
  reason: string;
  /** SLURM's priority (%Q): 0 while held. */
  priority: number;
  /** The job's nice value (%y). */
  nice: number;
  /** Where it runs or ran (%N); empty while pending. */
  nodes: string;
  /** The job's comment (%k): the dispatcher's marker. */
  comment: string;
}

// A unit separator between fields: job names and comments of other people's jobs may hold '|' or spaces.
const SEP = '\x1f';
const FIELDS = ['%i', '%j', '%T', '%r', '%Q', '%y', '%N', '%k'];

/** squeue's arguments: every job of this user in every state still listed (finished ones for MinJobAge). */
export function squeueArgs(): string[] {
  return ['--noheader', '--me', '--states=all', `--format=${FIELDS.join(SEP)}`];
}

/** The comment that marks the jobs of one dispatcher (`--comment` at submit). */
export function jobMarker(dispatcherId: string): string {
  return `berth:${dispatcherId}`;
}

/**
 * Parses squeue's output (squeueArgs' format). Lines that do not have the expected fields are returned in
 * `bad` (and otherwise ignored), so a format surprise is reported instead of silently losing jobs.
 */
export function parseSqueue(stdout: string): { jobs: SlurmJob[]; bad: string[] } {
  const jobs: SlurmJob[] = [];
  const bad: string[] = [];
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') continue;
    const f = line.split(SEP);
    if (f.length !== FIELDS.length) {
      bad.push(line);
      continue;
    }
    const [id, name, state, reason, prio, nice, nodes, comment] = f as [string, ...string[]];
    const priority = Number(prio);
    const niceN = Number(nice);
    if (!/^\d+(_\d+)?$/.test(id.trim()) || !Number.isFinite(priority) || !Number.isFinite(niceN)) {
      bad.push(line);
      continue;
    }
    jobs.push({
      id: id.trim(),
      name: name!,
      state: state!.trim(),
      reason: reason!.trim(),
      priority,
      nice: niceN,
      nodes: nodes!.trim() === '(null)' ? '' : nodes!.trim(),
      comment: comment === '(null)' ? '' : comment!,
    });
  }
  return { jobs, bad };
}

/**
 * States in which the job still holds (or will hold) resources and may still run the agent. Everything
 * else (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, OUT_OF_MEMORY, DEADLINE)
 * has ended. COMPLETING counts as ended: the batch script (the agent) has exited and SLURM is cleaning up.
 */
const LIVE = new Set([
  'PENDING',
  'CONFIGURING',
  'RUNNING',
  'SUSPENDED',
  'STOPPED',
  'SIGNALING',
  'STAGE_OUT',
  'RESIZING',
  'REQUEUED',
  'REQUEUE_HOLD',
  'REQUEUE_FED',
  'RESV_DEL_HOLD',
  'SPECIAL_EXIT',
]);

export function isLive(job: SlurmJob): boolean {
  return LIVE.has(job.state);
}

/** A pending job held by SLURM (priority 0): it will not start until released. */
export function isHeld(job: SlurmJob): boolean {
  return job.state === 'PENDING' && job.priority === 0;
}
