// `npm run bench -- e2e [--count N] [--instances N] [--seconds S] [--json]`: end to end, submit to all
// done (issue 12). A whole Berth in this process (embedded PostgreSQL, server, dispatcher with the local
// driver: each instance a `berth agent` process on the process runtime), up to --instances instances of
// one slot each (a 1-vCPU type, 1-vCPU containers). --count containers (`true`, or `sleep S` with
// --seconds) are submitted over HTTP in batches of 1,000; the clock runs from the first submission to
// the last request final. Prints lifecycles/s, with --seconds the ratio to the ideal (work / slots), and
// where each slot's time goes between two containers (bench/e2e-stages.ts).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { collectAgentLogs, measureStages, stagesTable } from './e2e-stages.js';
import { startWarmBerth } from './warm-berth.js';
import { benchArgs, opt } from './args.js';

/** Pids of processes whose command line mentions `path` (agents left behind). */
function mentioning(path: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', path], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map(Number)
      .filter((pid) => pid !== process.pid);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** A process's command line, for the warning (empty when it is gone). */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 200);
  } catch {
    return '';
  }
}

const OPTIONS = {
  count: opt.int(10_000, 'containers to run'),
  instances: opt.int(20, 'local instances at most (one slot each)'),
  seconds: opt.number(0, 'each container runs `sleep X` (0: `true`)', false),
  json: opt.flag('print JSON'),
};

export async function run(argv: string[]): Promise<number> {
  const { count, instances, seconds, json } = benchArgs('e2e', argv, OPTIONS);
  const say = (s: string) => !json && console.error(s);
  say(`starting Berth (up to ${instances} local instances)…`);
  const berth = await startWarmBerth({
    prefix: 'berth-e2e-',
    instance: { name: 'one', vcpus: 1, ram: '1GiB' },
    maxInstances: instances,
    // The agents' `starting` and `exited` lines time the stages (bench/e2e-stages.ts).
    agentArgs: ['--log-level', 'info'],
  });
  const { server } = berth;
  try {
    const headers = {
      authorization: `Bearer ${server.createdAdminToken!}`,
      'content-type': 'application/json',
    };
    const command = seconds > 0 ? ['sleep', String(seconds)] : ['true'];
    const t0 = performance.now();
    const wallT0 = Date.now();
    for (let from = 0; from < count; from += 1_000) {
      const requests = Array.from({ length: Math.min(1_000, count - from) }, () => ({
        command,
        vcpus: 1,
        ram: '64MiB',
      }));
      const r = await fetch(`${server.url}/v1/requests/batch`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ requests }),
      });
      if (r.status >= 300) throw new Error(`submit: ${r.status} ${await r.text()}`);
    }
    const submitted = performance.now();
    say(`${count} submitted in ${((submitted - t0) / 1000).toFixed(1)} s; waiting for all to finish…`);
    const pool = server.store.ctx.pool;
    let final = 0;
    let last = 0;
    const agentLogs = new Map<string, string>();
    for (;;) {
      const r = await pool.query<{ n: string; ok: string }>(
        `SELECT count(*) AS n, count(*) FILTER (WHERE outcome = 'success') AS ok
         FROM container_requests WHERE state = 'Final'`,
      );
      final = Number(r.rows[0]!.n);
      if (final >= count) {
        if (Number(r.rows[0]!.ok) !== count)
          throw new Error(`${count - Number(r.rows[0]!.ok)} did not succeed`);
        break;
      }
      if (performance.now() - last > 10_000) {
        say(`  ${final} / ${count} final after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
        await collectAgentLogs(berth.home, agentLogs);
        last = performance.now();
      }
      await new Promise((res) => setTimeout(res, 200));
    }
    const elapsed = (performance.now() - t0) / 1000;
    const stages = await measureStages(pool, berth.home, agentLogs, wallT0);
    const result = {
      count,
      instances,
      seconds,
      elapsedSeconds: Number(elapsed.toFixed(2)),
      lifecyclesPerSecond: Math.round(count / elapsed),
      /** Work / slots: the time a perfect scheduler with free instant starts would take. */
      idealSeconds: seconds > 0 ? (count * seconds) / instances : null,
      ratioToIdeal: seconds > 0 ? Number((elapsed / ((count * seconds) / instances)).toFixed(3)) : null,
      stages,
    };
    if (json) console.log(JSON.stringify(result));
    else {
      console.log(
        `e2e: ${count} containers on ≤ ${instances} local instances: ${result.elapsedSeconds} s, ${result.lifecyclesPerSecond} lifecycles/s`,
      );
      if (result.ratioToIdeal !== null)
        console.log(`  ideal (work / slots) ${result.idealSeconds} s; ratio ${result.ratioToIdeal}`);
      console.log(stagesTable(stages));
    }
    return 0;
  } finally {
    await berth.stop();
    // Agents the shutdown left running (seen once with 20 instances): say so, and end them.
    const left = mentioning(berth.home);
    if (left.length > 0) {
      console.error(`warning: ${left.length} processes of ${berth.home} still ran after the stop; killed:`);
      for (const pid of left.slice(0, 5)) console.error(`  ${pid} ${commandOf(pid)}`);
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
  }
}
