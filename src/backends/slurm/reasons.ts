// SLURM's pending reasons (squeue %r) and job states in Berth's words, for `berth why` and the reasons of
// cancelled containers. Pure.
import type { SlurmJob } from './squeue.js';

/** Exact reasons; the ones that come with detail ("ReqNodeNotAvail, UnavailableNodes:n1") match by prefix. */
const REASONS: [string, string][] = [
  ['None', 'SLURM has not considered it yet'],
  ['Priority', "jobs of higher priority are ahead of it in SLURM's queue"],
  ['Resources', 'it is next; SLURM waits for a node with enough free CPUs, memory and disk'],
  [
    'BadConstraints',
    'no node of the partition can ever satisfy its request (CPUs, memory, tmp, GPUs or features)',
  ],
  ['ReqNodeNotAvail', 'the nodes that could run it are down, drained or reserved'],
  ['NodeDown', 'a node it needs is down'],
  ['Dependency', 'it waits for another job it depends on'],
  ['DependencyNeverSatisfied', 'a job it depends on failed, so it can never start'],
  ['BeginTime', 'its start time has not come'],
  ['JobHeldUser', 'it is held by its user (scontrol release lets it run)'],
  ['JobHeldAdmin', 'it is held by a SLURM administrator'],
  ['PartitionDown', 'its partition is down'],
  ['PartitionInactive', 'its partition is inactive'],
  ['PartitionNodeLimit', 'it asks for more nodes than its partition allows'],
  ['PartitionTimeLimit', 'it asks for more time than its partition allows'],
  ['PartitionConfig', "the partition's settings exclude it"],
  ['Reservation', 'it waits for its advanced reservation'],
  ['Licenses', 'it waits for licenses'],
  ['InvalidAccount', 'its account is invalid'],
  ['InvalidQOS', 'its QOS is invalid'],
  ['Cleaning', 'SLURM is still cleaning up after an earlier run of it'],
  ['Prolog', "the node's prolog is running"],
  ['launch failed requeued held', 'its launch failed; SLURM requeued and held it'],
  ['JobLaunchFailure', 'SLURM could not launch it'],
  ['SystemFailure', 'a SLURM failure stopped it'],
  ['FrontEndDown', 'no front end node is available'],
  ['MaxRequeue', 'it reached its requeue limit'],
];
const EXACT = new Map(REASONS);

/** A SLURM pending reason in Berth's words (limits of accounts and QOS are recognised by their prefix). */
export function reasonText(reason: string): string {
  const r = reason.trim();
  const exact = EXACT.get(r);
  if (exact) return exact;
  const head = r.split(/[ ,]/)[0]!;
  const byHead = EXACT.get(head);
  if (byHead) return byHead;
  if (/^(Assoc|QOS)/.test(r)) return `a SLURM ${r.startsWith('QOS') ? 'QOS' : 'account'} limit holds it back`;
  return 'SLURM gives no further detail';
}

/** The status of a container whose job waits in SLURM's queue (`berth why`). */
export function pendingStatus(job: SlurmJob): string {
  const reason = job.reason || 'None';
  return `SLURM job ${job.id} is pending: ${reasonText(reason)} (SLURM reason: ${reason})`;
}

/** The status of a Locked container whose job runs: its agent is about to start it. */
export function startingStatus(job: SlurmJob): string {
  return `SLURM job ${job.id} started${job.nodes ? ` on ${job.nodes}` : ''}; its agent is starting the container`;
}

/**
 * How a container's job ended ("SLURM job 12 ended: NODE_FAIL (NodeDown)"): `job` is its record if squeue
 * still lists it (finished jobs stay listed for MinJobAge), `boundId` its id if known.
 */
export function endedText(name: string, boundId: string | null, job: SlurmJob | undefined): string {
  if (!job)
    return boundId ? `SLURM job ${boundId} is gone from squeue` : `no SLURM job named ${name} is listed`;
  const why = job.reason && job.reason !== 'None' ? ` (${job.reason})` : '';
  return `SLURM job ${job.id} ended: ${job.state}${why}`;
}
