// `berth up --demo`: submit the demo workload (or resume it), show progress, summarise, and wait until
// every instance has shut down.
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { formatDuration, formatSize } from '../model/units.js';
import { ofRequest } from '../store/records.js';
import type { Store } from '../store/store.js';
import { DEMO_PREFIX, demoRequests } from './demo.js';
import { table } from './format.js';

interface Row {
  id: string;
  name: string;
  state: string;
  outcome: string | null;
  cstate: string | null;
  attempts: number;
  temp_failures: number;
  exit_code: number | null;
  usage: { peak_ram: number; cpu_seconds: number; wall_ms: number } | null;
  instance_id: string | null;
}

export async function runDemo(
  store: Store,
  dispatcher: Dispatcher,
  say: (line: string) => void,
  stopped: () => boolean = () => false,
): Promise<'ok' | 'failed' | 'stopped'> {
  const pool = store.ctx.pool;
  const pending = await pool.query(
    `SELECT id FROM container_requests WHERE name LIKE $1 AND state = 'Committed'`,
    [`${DEMO_PREFIX}%`],
  );
  let ids: string[];
  if (pending.rowCount! > 0) {
    ids = (
      await pool.query(`SELECT id FROM container_requests WHERE name LIKE $1 ORDER BY id`, [
        `${DEMO_PREFIX}%`,
      ])
    ).rows.map((r) => r.id);
    say(`resuming the demo: ${pending.rowCount} of ${ids.length} requests still to finish`);
  } else {
    ids = (await store.requests.create('demo', demoRequests())).map((r) => r.id);
    say(`submitted ${ids.length} demo requests (watch them with: npx berth ps)`);
  }
  let last = '';
  let rows: Row[] = [];
  for (;;) {
    if (stopped()) return 'stopped';
    rows = (
      await pool.query(
        `SELECT r.id, r.name, r.state, r.outcome, c.state AS cstate, r.attempts, r.temp_failures, c.exit_code, c.usage, c.instance_id
         FROM container_requests r LEFT JOIN containers c ON c.id = r.container_id WHERE r.id = ANY($1) ORDER BY r.name`,
        [ids],
      )
    ).rows;
    const count = (f: (r: Row) => boolean) => rows.filter(f).length;
    const inst = [...dispatcher.instances.values()].filter((i) => i.state !== 'gone');
    const byType = new Map<string, string[]>();
    for (const i of inst) (byType.get(i.type) ?? byType.set(i.type, []).get(i.type)!).push(i.state);
    const line =
      `queued ${count((r) => r.state === 'Committed' && (r.cstate === 'Queued' || r.cstate === 'Locked'))}, ` +
      `running ${count((r) => r.cstate === 'Running')}, finished ${count((r) => r.state === 'Final')}/${rows.length}; ` +
      `instances: ${inst.length === 0 ? 'none' : [...byType].map(([t, states]) => `${t}×${states.length} (${[...new Set(states)].join('/')})`).join(', ')}`;
    if (line !== last) say(line);
    last = line;
    if (rows.every((r) => r.state === 'Final')) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  console.log(
    table(
      ['REQUEST', 'NAME', 'OUTCOME', 'EXIT', 'ATTEMPTS', 'RETRIES', 'PEAK MEMORY', 'CPU', 'WALL'],
      rows.map((r) => [
        r.id,
        r.name,
        r.outcome ?? '-',
        r.exit_code === null ? '-' : String(r.exit_code),
        String(r.attempts),
        String(r.temp_failures),
        r.usage ? formatSize(r.usage.peak_ram) : '-',
        r.usage ? `${r.usage.cpu_seconds.toFixed(2)}s` : '-',
        r.usage ? formatDuration(r.usage.wall_ms) : '-',
      ]),
    ),
  );
  // An infrastructure retry is not part of the demo: say what caused each one.
  const retried = await pool.query<{ name: string; attempt: number; runtime_status: string | null }>(
    `SELECT r.name, c.attempt, c.runtime_status FROM container_requests r JOIN containers c ON ${ofRequest('c', 'r.id')}
     WHERE r.id = ANY($1) AND c.failure_class = 'temp' ORDER BY r.name, c.created_at`,
    [ids],
  );
  for (const r of retried.rows)
    say(
      `${r.name} was retried (infrastructure, attempt ${r.attempt}): ${r.runtime_status ?? 'no reason recorded'}`,
    );
  say(
    'all demo requests are finished (demo-fails-once fails on purpose: it exits 3, twice); waiting for idle instances to shut down',
  );
  const deadline = Date.now() + 120_000;
  while ([...dispatcher.instances.values()].some((i) => i.state !== 'gone') && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 500));
  const left = [...dispatcher.instances.values()].filter((i) => i.state !== 'gone').length;
  if (left > 0) say(`${left} instance(s) still up after 2 minutes; stopping them`);
  else say('every instance has shut down');
  const expected = rows.every((r) =>
    r.name === `${DEMO_PREFIX}fails-once` ? r.outcome === 'failed' : r.outcome === 'success',
  );
  return expected ? 'ok' : 'failed';
}
