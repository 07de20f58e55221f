// `npm run bench -- slurm-agent [--runs N] [--entry agent|modules|full] [--trace] [--cpu-prof DIR]`: where a SLURM job's time goes inside the
// one-shot agent. Without SLURM: a real API server (embedded PostgreSQL) and, N times in a row, a container
// locked and assigned to a fresh node record as the slurm dispatcher does it, then the agent run as a job's
// batch script runs it (`node … agent --once ID`, the secret on stdin), timed from the spawn through its log
// lines (JSON, ms) to its exit. Prints the p50/p90 of each phase. Numbers depend on the machine's load.
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/options.js';
import { PgQueue } from '../src/dispatch/pg-queue.js';
import { defaultBerthBin } from '../src/cloud/local/driver.js';
import { startServer } from '../src/server/server.js';
import { pct } from './vs-slurm/common.js';
import { benchArgs, opt } from './args.js';

const DISPATCHER = 'bench/slurm-agent';

/** The phases, each from the spawn to a log line of the agent (its message) or to the process exit. */
const MARKS: [string, RegExp][] = [
  ['options read (first log line)', /^configuration$/],
  ['runtime chosen', /^runtime /],
  ['registered', /^registered$/],
  ['start order received', /^starting$/],
  ['exit reported', /^exited /],
];

const OPTIONS = {
  runs: opt.int(20, 'one-shot agents run one after the other'),
  entry: opt.oneOf(
    ['agent', 'modules', 'full'] as const,
    'agent',
    'agent: bin/berth.js (the bundle), modules: tsc output, full: the whole CLI',
  ),
  trace: opt.flag("print each agent's log lines"),
  'cpu-prof': opt.text(undefined, 'each agent writes a V8 CPU profile into this directory'),
};

export async function run(argv: string[]): Promise<number> {
  const o = benchArgs('slurm-agent', argv, OPTIONS);
  const { runs, entry } = o;
  // `agent`: bin/berth.js, as a SLURM job runs it (the one-file bundle of `npm run build`). `modules`: the
  // agent's command from tsc's modules, one by one (bin/berth.js before the bundle). `full`: the whole CLI
  // loaded, as bin/berth.js did for every command before it picked the agent's alone.
  const module = entry === 'modules' ? '../src/cli/agent-main.js' : '../src/cli/main.js';
  const bin =
    entry === 'agent'
      ? [defaultBerthBin(), 'agent']
      : [
          '--input-type=module',
          '-e',
          `const { main } = await import(${JSON.stringify(new URL(module, import.meta.url).href)}); ` +
            `process.exitCode = await main(['node', 'berth', ...process.argv.slice(1)]);`,
          'agent',
        ];
  // --cpu-prof DIR: each agent writes a V8 CPU profile there (open it in Chrome's DevTools).
  const profDir = o['cpu-prof'];
  if (profDir) bin.unshift('--cpu-prof', '--cpu-prof-interval', '200', '--cpu-prof-dir', profDir);
  const home = mkdtempSync(join(tmpdir(), 'berth-slurm-agent-'));
  chmodSync(home, 0o711); // as root, PostgreSQL runs as postgres and must reach home/pgdata
  const server = await startServer(loadConfig({ home, listen: '127.0.0.1:0', log_level: 'silent' }, {}));
  const queue = new PgQueue(server.store, server.db.url);
  const times = new Map<string, number[]>();
  try {
    for (let i = 0; i < runs; i++) {
      const r = await fetch(`${server.url}/v1/requests`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${server.createdAdminToken!}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ command: ['true'], vcpus: 1, ram: '64MiB' }),
      });
      if (!r.ok) throw new Error(`POST /v1/requests: HTTP ${r.status} ${await r.text()}`);
      const { container_id: id } = (await r.json()) as { container_id: string };
      await queue.lock([id], DISPATCHER);
      const node = await queue.createNode('slurm', 'bench', 'agent');
      await queue.assign([{ id, instance: `slurm-job-${i}`, node: node.nodeId }], DISPATCHER);
      await queue.bindNode(node.nodeId, `slurm-job-${i}`);
      const cpu0 = childrenCpuMs();
      const marks = await timeAgent(bin, {
        id,
        apiUrl: server.url,
        nodeId: node.nodeId,
        secret: node.bootstrapSecret,
        workDir: join(home, 'work', id),
        trace: o.trace,
      });
      marks.set(CPU_MARK, childrenCpuMs() - cpu0);
      for (const [k, v] of marks) (times.get(k) ?? times.set(k, []).get(k)!).push(v);
    }
  } finally {
    await server.stop();
    rmSync(home, { recursive: true, force: true });
  }
  console.log(`one-shot agent (${entry} entry), ${runs} runs, ms from spawn: p50 / p90`);
  for (const [k] of [...MARKS, ['process exited'], [CPU_MARK]]) {
    const v = (times.get(k) ?? []).sort((a, b) => a - b);
    console.log(
      `  ${k.padEnd(32)} ${v.length ? `${pct(v, 50).toFixed(0)} / ${pct(v, 90).toFixed(0)}` : '—'}`,
    );
  }
  return 0;
}

/** The agent's CPU time: user + system of it and the children it waited for (bwrap, the shim, the container). */
const CPU_MARK = 'CPU ms (agent and its children)';

/**
 * CPU time of this process's children that were waited for, in ms (/proc/self/stat cutime + cstime, in
 * clock ticks of 10 ms): the agent's, once it exited. The embedded PostgreSQL is not counted until it stops.
 */
function childrenCpuMs(): number {
  // Fields after the command name (which may hold spaces and parentheses: cut at the last one).
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) * 10; // cutime, cstime: fields 16 and 17 of stat(5)
}

/** Runs one one-shot agent; the ms from the spawn to each mark. */
function timeAgent(
  bin: string[],
  o: { id: string; apiUrl: string; nodeId: string; secret: string; workDir: string; trace: boolean },
): Promise<Map<string, number>> {
  const t0 = Date.now();
  const child = spawn(
    process.execPath,
    [
      ...bin,
      '--once',
      o.id,
      '--api-url',
      o.apiUrl,
      '--node-id',
      o.nodeId,
      '--work-dir',
      o.workDir,
      '--runtime',
      'process',
      '--bootstrap-secret-file',
      '-',
      '--log-level',
      'debug',
    ],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  child.stdin.end(`${o.secret}\n`);
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      const exited = Date.now() - t0;
      if (code !== 0) return reject(new Error(`the agent exited ${code}: ${err.slice(-2000)}`));
      const out = new Map<string, number>([['process exited', exited]]);
      for (const line of err.split('\n')) {
        if (!line.startsWith('{')) continue;
        const rec = JSON.parse(line) as { msg?: string; time?: string };
        if (o.trace && rec.time)
          console.log(`  ${String(Date.parse(rec.time) - t0).padStart(5)} ms  ${rec.msg}`);
        const mark = MARKS.find(([, re]) => re.test(rec.msg ?? ''));
        if (mark && rec.time && !out.has(mark[0])) out.set(mark[0], Date.parse(rec.time) - t0);
      }
      resolve(out);
    });
  });
}
