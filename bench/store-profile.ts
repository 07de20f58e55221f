// Where a phase of `bench -- queue --profile` spends its time: CPU seconds of each process (the server's
// Node process, PostgreSQL's, this one) read from /proc, and PostgreSQL's statements by total time from
// pg_stat_statements (which the profile run preloads into the embedded server).
import { readdirSync, readFileSync } from 'node:fs';
import type { Db } from '../src/store/db.js';

/** Clock ticks per second of /proc/PID/stat's utime and stime (USER_HZ, 100 on Linux). */
const TICKS = 100;

/** CPU seconds of a process from /proc/PID/stat: its own (utime, stime) or, `reaped`, its waited-for children's
 * (cutime, cstime: a backend that has exited, for the postmaster). */
function cpuOf(pid: number, reaped = false): number {
  try {
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const at = reaped ? 13 : 11;
    return (Number(f[at]) + Number(f[at + 1])) / TICKS;
  } catch {
    return 0; // gone
  }
}

function parentOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

/** CPU seconds so far of the server, of PostgreSQL (postmaster and its children, live and exited) and of this process. */
export interface CpuSample {
  server: number;
  postgres: number;
  bench: number;
}

export function cpuSample(serverPid: number | null, postmasterPid: number): CpuSample {
  // The backends of a pool closed before the sample (the peer bench's) count too: the postmaster reaps them.
  let postgres = cpuOf(postmasterPid) + cpuOf(postmasterPid, true);
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (Number.isInteger(pid) && parentOf(pid) === postmasterPid) postgres += cpuOf(pid);
  }
  const own = process.cpuUsage();
  return {
    server: serverPid === null ? 0 : cpuOf(serverPid),
    postgres,
    bench: (own.user + own.system) / 1e6,
  };
}

export interface StatementCost {
  calls: number;
  total_ms: number;
  mean_ms: number;
  wal_bytes: number;
  query: string;
}

/** The top statements by total execution time since the last reset; resets. */
export async function topStatements(pool: Db, limit = 8): Promise<StatementCost[]> {
  const r = await pool.query(
    `SELECT calls::int, round(total_exec_time::numeric, 1)::float8 AS total_ms,
       round(mean_exec_time::numeric, 3)::float8 AS mean_ms, wal_bytes::float8,
       regexp_replace(left(query, 110), '\\s+', ' ', 'g') AS query
     FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
     ORDER BY total_exec_time DESC LIMIT $1`,
    [limit],
  );
  await pool.query('SELECT pg_stat_statements_reset()');
  return r.rows as StatementCost[];
}

/** The postmaster's pid of a data directory (first line of postmaster.pid). */
export function postmasterPid(dataDir: string): number {
  return Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
}

/** Prints a phase's profile: CPU per process per operation, and the top statements. */
export function printProfile(
  say: (s: string) => void,
  phase: string,
  ops: number,
  before: CpuSample,
  after: CpuSample,
  statements: StatementCost[],
): void {
  const per = (k: keyof CpuSample) => (((after[k] - before[k]) / ops) * 1e3).toFixed(3);
  say(
    `  profile ${phase}: CPU ms per operation: server ${per('server')}, PostgreSQL ${per('postgres')}, bench ${per('bench')}`,
  );
  for (const s of statements)
    say(
      `    ${String(s.calls).padStart(7)} calls ${s.total_ms.toFixed(0).padStart(7)} ms (${s.mean_ms.toFixed(3)} ms each, ${((s.wal_bytes / Math.max(1, s.calls)) | 0).toString()} WAL bytes each) ${s.query}`,
    );
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** A phase of the run in CLOCK_MONOTONIC microseconds: V8's profile timestamps use the same clock. */
export interface Window {
  phase: string;
  from: number;
  to: number;
}

/** Now on CLOCK_MONOTONIC, in microseconds (the clock of a V8 CPU profile's timestamps). */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** Where a V8 CPU profile's samples of each window fall: by package (or our file) and by function, self time. */
export function printCpuProfile(say: (s: string) => void, dir: string, windows: Window[], top = 12): void {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  } catch {
    return say('  no server CPU profile was written');
  }
  for (const f of files) {
    const prof = JSON.parse(readFileSync(`${dir}/${f}`, 'utf8')) as {
      nodes: ProfileNode[];
      samples: number[];
      timeDeltas: number[];
      startTime: number;
    };
    const byId = new Map(prof.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const where = (n: ProfileNode) => {
      const url = n.callFrame.url;
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
      if (pkg) return pkg;
      if (url.includes('/dist/src/')) return url.slice(url.indexOf('/dist/src/') + 6);
      if (url.startsWith('node:')) return url;
      return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : url || '(native)';
    };
    for (const w of windows) {
      const byPlace = new Map<string, number>();
      const byFunction = new Map<string, number>();
      let t = prof.startTime;
      let busy = 0;
      const stacks = new Map<string, number>();
      // Inclusive: a sample counts once for every place on its stack (what a package costs with its callees).
      const inclusive = new Map<string, number>();
      prof.samples.forEach((s, i) => {
        t += prof.timeDeltas[i]!;
        const n = byId.get(s)!;
        if (t < w.from || t > w.to || n.callFrame.functionName === '(idle)') return;
        busy++;
        const place = where(n);
        byPlace.set(place, (byPlace.get(place) ?? 0) + 1);
        const fn = `${n.callFrame.functionName || '(anonymous)'} ${place}:${n.callFrame.lineNumber + 1}`;
        byFunction.set(fn, (byFunction.get(fn) ?? 0) + 1);
        // The 6 frames under a leaf: who calls into the costliest natives (writev, GC, crypto).
        const frames: string[] = [];
        for (let id = s, k = 0; k < 7 && id !== undefined; id = parent.get(id)!, k++) {
          const f = byId.get(id)!;
          frames.push(
            `${f.callFrame.functionName || '(anonymous)'}@${where(f)}:${f.callFrame.lineNumber + 1}`,
          );
        }
        const key = frames.join(' < ');
        stacks.set(key, (stacks.get(key) ?? 0) + 1);
        const on = new Set<string>();
        for (let id: number | undefined = s; id !== undefined; id = parent.get(id)) {
          const f = byId.get(id)!;
          const p = where(f);
          on.add(p.startsWith('src/') ? `${p} ${f.callFrame.functionName || '(anonymous)'}` : p);
        }
        for (const p of on) inclusive.set(p, (inclusive.get(p) ?? 0) + 1);
      });
      if (busy === 0) continue;
      const show = (title: string, m: Map<string, number>, rows = top) => {
        say(`  server CPU profile, ${w.phase}, ${busy} busy samples, self time by ${title}:`);
        for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, rows))
          say(`    ${((100 * v) / busy).toFixed(1).padStart(5)}% ${k}`);
      };
      show('place', byPlace);
      show('function', byFunction);
      show('stack', stacks);
      show('place with its callees (ours by function)', inclusive, 3 * top);
    }
  }
}

/**
 * How the store's tables were used since the database's statistics began: per index of containers,
 * container_requests and container_events its scans (idx_scan 0: no query of the run used it), and per table
 * its updates and how many were HOT. Backends report their statistics within a second or so: read after a
 * phase, not during it.
 */
export async function printIndexUse(say: (s: string) => void, pool: Db): Promise<void> {
  const tables = await pool.query(
    `SELECT relname, n_tup_ins::float8 AS ins, n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot
     FROM pg_stat_user_tables WHERE relname IN ('containers', 'container_requests', 'container_events')
     ORDER BY relname`,
  );
  for (const t of tables.rows)
    say(`  table ${t.relname}: ${t.ins} inserted, ${t.upd} updated (${t.hot} HOT)`);
  const idx = await pool.query(
    `SELECT relname, indexrelname, idx_scan::float8 AS scans, idx_tup_read::float8 AS read
     FROM pg_stat_user_indexes WHERE relname IN ('containers', 'container_requests', 'container_events')
     ORDER BY relname, indexrelname`,
  );
  for (const i of idx.rows)
    say(
      `    index ${i.indexrelname}: ${i.scans} scans, ${i.read} entries read${i.scans === 0 ? ' (unused)' : ''}`,
    );
}
