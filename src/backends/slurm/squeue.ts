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

/**
 * What squeue lists: this user's live jobs (a pass: SLURM keeps ended jobs listed for MinJobAge, which would
 * be every job of the last 5 minutes), the named jobs in any state (how a job that left the live list ended),
 * or every job in any state (tests).
 */
export type SqueueSelect = 'live' | 'all' | { ids: readonly string[] };

/** squeue's arguments for a selection. */
export function squeueArgs(select: SqueueSelect): string[] {
  const which =
    select === 'live'
      ? [`--states=${[...LIVE].join(',')}`]
      : select === 'all'
        ? ['--states=all']
        : // One id makes squeue ask for that job alone, which fails once SLURM has forgotten it; listed
          // twice, squeue filters its whole list instead (and says nothing of forgotten ids).
          [
            '--states=all',
            `--jobs=${(select.ids.length === 1 ? [select.ids[0], ...select.ids] : select.ids).join(',')}`,
          ];
  return ['--noheader', '--me', ...which, `--format=${FIELDS.join(SEP)}`];
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
