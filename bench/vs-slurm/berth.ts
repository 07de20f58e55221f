// The Berth side of `bench vs-slurm`: the same setup as `berth up` in this process (embedded PostgreSQL,
// API server, dispatcher, local driver) with ONE warm instance the size of the machine, and N jobs
// submitted over HTTP. Latencies come from the database (queued_at → started_at, microseconds).
import type { Db } from '../../src/store/db.js';
import { startWarmBerth } from '../warm-berth.js';
import { maxOverlap, pollUntil, runPool, type SideResult } from './common.js';

export type SubmitMode = 'single' | 'batch';

export interface BerthOptions {
  jobs: number;
  concurrency: number;
  submit: SubmitMode;
  command: string[];
  ramMiB: number;
  /** The one instance type: the whole machine. */
  vcpus: number;
  instanceRamMiB: number;
  say: (line: string) => void;
}

/** Largest batch the API takes in one call. */
const BATCH_MAX = 1000;

export async function runBerthJobs(o: BerthOptions): Promise<SideResult> {
  o.say('berth: starting and waiting for the warm instance…');
  // max_instances 1: with a deep queue the dispatcher would otherwise add instances (128 local agents for
  // 1,000 jobs on this 2-core machine), which is not the one-warm-node setup being compared.
  const berth = await startWarmBerth({
    prefix: 'berth-vs-slurm-',
    instance: { name: 'machine', vcpus: o.vcpus, ram: `${o.instanceRamMiB}MiB` },
    maxInstances: 1,
  });
  try {
    return await submitAndMeasure(berth.server, { ...o, say: (line) => o.say(`berth: ${line}`) });
  } finally {
    await berth.stop();
  }
}

/**
 * Submits N requests to a running Berth over HTTP (one POST each, or batches) and waits for every container
 * to end; the latencies come from the database (queued_at → started_at, microseconds).
 */
export async function submitAndMeasure(
  server: { url: string; createdAdminToken: string | null; store: { ctx: { pool: Db } } },
  o: Pick<BerthOptions, 'jobs' | 'concurrency' | 'submit' | 'command' | 'ramMiB' | 'say'>,
): Promise<SideResult> {
  const headers = {
    authorization: `Bearer ${server.createdAdminToken!}`,
    'content-type': 'application/json',
  };
  const spec = { command: o.command, vcpus: 1, ram: `${o.ramMiB}MiB` };
  const post = async (path: string, body: unknown) => {
    const r = await fetch(`${server.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    if (!r.ok) throw new Error(`POST ${path}: HTTP ${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  };
  o.say(
    `${o.jobs} jobs (${o.submit === 'single' ? `one POST each, ${o.concurrency} at a time` : `batches of up to ${BATCH_MAX}`})…`,
  );
  const pool = server.store.ctx.pool;
  const t0 = performance.now();
  if (o.submit === 'single') await runPool(o.jobs, o.concurrency, () => post('/v1/requests', spec));
  else
    await runPool(Math.ceil(o.jobs / BATCH_MAX), o.concurrency, (i) =>
      post('/v1/requests/batch', {
        requests: Array.from({ length: Math.min(BATCH_MAX, o.jobs - i * BATCH_MAX) }, () => spec),
      }),
    );
  const submitted = performance.now();
  // The database is this run's own: every container in it is one of ours.
  await pollUntil(
    async () =>
      (
        await pool.query(
          `SELECT count(*)::int AS n FROM containers WHERE state NOT IN ('Complete', 'Cancelled')`,
        )
      ).rows[0].n === 0,
    24 * 3600_000,
    100,
  );
  const done = performance.now();
  const rows = (
    await pool.query(
      `SELECT extract(epoch FROM started_at - queued_at) * 1000 AS ms,
              extract(epoch FROM started_at) * 1000 AS s, extract(epoch FROM finished_at) * 1000 AS f,
              state, exit_code
         FROM containers`,
    )
  ).rows as {
    ms: string | null;
    s: string | null;
    f: string | null;
    state: string;
    exit_code: number | null;
  }[];
  const ran = rows
    .filter((r) => r.s !== null && r.f !== null)
    .map((r): [number, number] => [Number(r.s), Number(r.f)]);
  return {
    jobs: o.jobs,
    recorded: rows.length,
    succeeded: rows.filter((r) => r.state === 'Complete' && r.exit_code === 0).length,
    submitSeconds: (submitted - t0) / 1000,
    makespanSeconds: (done - t0) / 1000,
    submitToStartMs: rows.filter((r) => r.ms !== null).map((r) => Number(r.ms)),
    runMs: ran.map(([a, b]) => b - a),
    maxRunning: maxOverlap(ran),
  };
}
