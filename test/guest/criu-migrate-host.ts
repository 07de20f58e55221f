// The host's half of the guest's CRIU migration cases (criu-migrate-case.ts has the guest's): a real API
// server over a test database (the agent e2e harness), which the guest's agents reach as 10.0.2.2, and
// the dispatcher's part, done through the store as the harness does it, for each runtime of
// CRIU_MIGRATIONS: submit an opportunistic counter (with that runtime's image) and assign it to its A before
// the guest boots; pause it once it counted a little (so that it stops well before its end at any speed, as
// vm-migrate.test.ts does); once A's reclaim handed it back, assign its retry to B. Then what the store
// shows: A's reclaim saved it whole and sent it up, B resumed it from the download, its output over both
// attempts is 1..N exactly once, its request ended once as a success, its events show the move. Resolves to
// the stages' times (save, upload, download, restore) as a line for the report. Each runtime's outcome is
// also answered on a status address (GET /<runtime>, once it is known), so that the guest's half stops
// waiting as soon as the host's failed.
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { alice, Harness, until } from '../agent-e2e/harness.js';
import {
  CRIU_MIGRATE_FILE,
  CRIU_MIGRATIONS,
  HOST_FAILED,
  type CriuMigrateSetup,
  type CriuMigrationKind,
} from './criu-migrate-case.js';

/** The counter's end: it counts 1..N, one line every 0.2 s (12 s at least, whatever the host's speed). */
const N = 60;

function check(ok: boolean, what: string, detail: string): void {
  if (!ok) throw new Error(`${what}: ${detail}`);
}

/** One migration's outcome: the report's line, and the retry's download + unpack and restore (ms). */
export type CriuMigrationOutcome =
  { ok: true; line: string; resumeMs: number } | { ok: false; error: string };

/** The running migrations: each runtime's outcome (never rejects: an error is the failure), the clean-up. */
export interface CriuMigrations {
  outcomes: Map<string, Promise<CriuMigrationOutcome>>;
  cleanup(): Promise<void>;
}

/** Answers GET /<runtime> with that runtime's outcome once it is known: `ok`, or HOST_FAILED and the error. */
async function serveStatus(outcomes: Map<string, Promise<CriuMigrationOutcome>>): Promise<Server> {
  const server = createServer((req, res) => {
    const outcome = outcomes.get((req.url ?? '').slice(1));
    if (!outcome) return void res.writeHead(404).end(`no migration ${req.url}\n`);
    void outcome.then((o) => res.end(o.ok ? 'ok\n' : `${HOST_FAILED}${o.error}`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

/**
 * Starts the API and the status address, submits and assigns each runtime's counter, and writes the guest's
 * setup into `dataDir`; the drivers run on while the guest boots and give up (failing) once `guestEnded()`
 * is true and they still wait.
 */
export async function startCriuMigrations(
  dataDir: string,
  guestEnded: () => boolean,
): Promise<CriuMigrations> {
  const h = await Harness.create();
  let status: Server | null = null;
  const cleanup = async () => {
    if (status) {
      status.closeAllConnections();
      await new Promise((r) => status!.close(r));
    }
    await h.cleanup();
  };
  try {
    const runs: CriuMigrateSetup['runs'] = {};
    const outcomes = new Map<string, Promise<CriuMigrationOutcome>>();
    for (const kind of CRIU_MIGRATIONS) {
      const a = await h.node();
      const b = await h.node();
      const opp = await h.submitCounter(a, N, kind.image === null ? {} : { image: kind.image });
      runs[kind.runtime] = { nodes: [a, b].map((n) => ({ id: n.id, secret: n.secret })), container: opp };
      outcomes.set(
        kind.runtime,
        drive(h, kind, opp, a, b, guestEnded).then(
          (r) => ({ ok: true as const, ...r }),
          (err: Error) => ({ ok: false as const, error: err.stack ?? String(err) }),
        ),
      );
    }
    status = await serveStatus(outcomes);
    const setup: CriuMigrateSetup = {
      apiUrl: `http://10.0.2.2:${h.port}`,
      statusUrl: `http://10.0.2.2:${(status.address() as AddressInfo).port}/`,
      runs,
    };
    await writeFile(join(dataDir, CRIU_MIGRATE_FILE), JSON.stringify(setup));
    return { outcomes, cleanup };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function drive(
  h: Harness,
  kind: CriuMigrationKind,
  opp: string,
  a: { id: string; instanceId: string },
  b: { id: string; instanceId: string },
  guestEnded: () => boolean,
): Promise<{ line: string; resumeMs: number }> {
  /** Waits for `fn` until the guest ended (plus a few seconds for what it reported last to land). */
  const wait = async <T>(fn: () => Promise<T | null | false>, what: string): Promise<T> => {
    let endedAt: number | null = null;
    return until(
      async () => {
        const v = await fn();
        if (v) return v;
        if (guestEnded()) endedAt ??= Date.now();
        if (endedAt !== null && Date.now() - endedAt > 5000)
          throw new Error(`the guest ended while the host waited for ${what}`);
        return null;
      },
      15 * 60_000,
      what,
    );
  };
  await wait(async () => (await h.text(opp, 'stdout')).split('\n').length > 3, 'the counter on A');
  await h.store.pauses.request(opp, true, alice);
  await wait(async () => (await h.store.containers.get(opp)).paused, 'the counter paused');
  const ended = await wait(async () => {
    const c = await h.store.containers.get(opp);
    return ['Cancelled', 'Complete', 'Failed'].includes(c.state) ? c : null;
  }, "the counter's end on A");
  const system = await h.text(opp, 'system');
  check(ended.state === 'Cancelled' && ended.failure_class === 'temp', 'its end on A', JSON.stringify(ended));
  check(/reclaimed: frozen \(memory pressure/.test(system), 'the reclaim in its log', system);
  const saved = new RegExp(
    `whole state saved by the ${kind.runtime} runtime: (\\d+) bytes in (\\d+) ms`,
  ).exec(system);
  check(saved !== null, 'the whole-state save in its log', system);
  const sent =
    /checkpoint kept: \d+ file\(s\), \d+ bytes \(a (\d+)-byte archive, packed and sent in (\d+) ms\)/.exec(
      system,
    );
  check(sent !== null, 'the checkpoint sent, in its log', system);
  const before = await h.text(opp, 'stdout');
  const last = Number(before.trim().split('\n').pop());
  check(last < N, 'stopped before its end', `last line ${last}`);
  const kinds = (await h.store.containerList.events(opp)).map((e) => e.kind);
  check(
    kinds.includes('migrate') &&
      kinds.includes('reclaim') &&
      kinds.indexOf('migrate') < kinds.indexOf('reclaim'),
    'its events (a migrate, then the reclaim)',
    JSON.stringify(kinds),
  );
  // Requeued as a migration, spending no retry (max_temp_retries 0 would have ended it otherwise).
  const req = await h.store.requests.get(ended.request_id);
  check(
    req.state === 'Committed' && req.temp_failures === 0 && req.container_id !== null,
    'its request after the reclaim',
    JSON.stringify(req),
  );
  const retry = req.container_id!;
  await h.assign(retry, b);
  const done = await wait(async () => {
    const c = await h.store.containers.get(retry);
    return ['Cancelled', 'Complete', 'Failed'].includes(c.state) ? c : null;
  }, 'the retry on B');
  const after = await h.text(retry, 'stdout');
  const retryLog = await h.text(retry, 'system');
  check(
    done.state === 'Complete' && done.exit_code === 0 && !done.oom_killed && done.node_id === b.id,
    'the retry on B',
    `${JSON.stringify(done)}; its log: ${retryLog}; its stdout ends ${after.slice(-100)}`,
  );
  // Not restarted, nothing lost or repeated.
  const want = Array.from({ length: N }, (_, k) => `${k + 1}\n`).join('');
  check(
    before + after === want && !after.startsWith('1\n'),
    'the output over both attempts is 1..N once',
    JSON.stringify({ before, after }),
  );
  const resumed =
    /checkpoint restored from an earlier attempt \((\d+) bytes, downloaded and unpacked in (\d+) ms\); resumed from its whole state where it stood in (\d+) ms/.exec(
      retryLog,
    );
  check(resumed !== null, 'the resume in the retry log', retryLog);
  const moves = await h.migrations(retry);
  check(
    moves.length === 1 && moves[0]!.includes(`from instance ${a.instanceId} to ${b.instanceId}`),
    "the retry's migrate event",
    JSON.stringify(moves),
  );
  const final = await h.store.requests.get(ended.request_id);
  check(
    final.state === 'Final' && final.outcome === 'success',
    'its request at the end',
    JSON.stringify(final),
  );
  return {
    line:
      `criu migration of a ${kind.runtime} container through the API (tcg guest, both agents in it; under shared load): ` +
      `save ${saved![2]} ms (${saved![1]} bytes of images), pack + upload ${sent![2]} ms (${sent![1]}-byte archive), ` +
      `download + unpack ${resumed![2]} ms, restore ${resumed![3]} ms; counter stopped after ${last} of ${N}`,
    resumeMs: Number(resumed![2]) + Number(resumed![3]),
  };
}
