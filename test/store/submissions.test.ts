// Single submissions are group-committed (src/store/requests.ts): concurrent callers share a statement,
// each gets its own request, and one that the database refuses fails alone. A batch stays all or nothing.
import { beforeAll, describe, expect, it } from 'vitest';
import { normalizeRequest, type RequestSpec } from '../../src/model/request.js';
import type { Store } from '../../src/store/store.js';
import { testStore } from '../helpers/store.js';

let store: Store;

beforeAll(async () => {
  ({ store } = await testStore());
});

const spec = (name: string): RequestSpec => normalizeRequest({ name, command: ['echo', name] });
/** A spec the database refuses (priority past int4; the API's validation never lets one through). */
const refused = (): RequestSpec => ({ ...spec('refused'), priority: 2 ** 40 });

async function rowsNamed(prefix: string) {
  const r = await store.ctx.pool.query(
    `SELECT r.id, r.owner, r.name, c.id AS cid, c.state, c.owner AS c_owner
     FROM container_requests r JOIN containers c ON c.id = r.container_id WHERE r.name LIKE $1 ORDER BY r.name`,
    [`${prefix}%`],
  );
  return r.rows as {
    id: string;
    owner: string;
    name: string;
    cid: string;
    state: string;
    c_owner: string;
  }[];
}

describe('single submissions', () => {
  it('share statements when concurrent, each caller getting its own request with its owner', async () => {
    const calls0 = store.requests.singleStats.calls;
    const n = 40;
    const made = await Promise.all(
      Array.from({ length: n }, (_, i) => store.requests.create(`owner${i % 3}`, [spec(`group-${i}`)])),
    );
    expect(store.requests.singleStats.calls - calls0).toBeLessThan(n);
    made.forEach(([r], i) => {
      expect(r!.name).toBe(`group-${i}`);
      expect(r!.owner).toBe(`owner${i % 3}`);
      expect(r!.container_state).toBe('Queued');
    });
    const rows = await rowsNamed('group-');
    expect(rows).toHaveLength(n);
    for (const row of rows) {
      const i = Number(row.name.slice('group-'.length));
      expect(made[i]![0]!.id).toBe(row.id);
      expect(row.owner).toBe(`owner${i % 3}`);
      expect(row.c_owner).toBe(row.owner);
      expect(row.state).toBe('Queued');
      const events = await store.containerList.events(row.cid);
      expect(events.map((e) => e.message)).toEqual(['Queued: submitted']);
    }
  });

  it('one the database refuses fails alone; the others of its group are recorded', async () => {
    const results = await Promise.allSettled([
      ...Array.from({ length: 5 }, (_, i) => store.requests.create('bob', [spec(`mixed-${i}`)])),
      store.requests.create('bob', [refused()]),
      ...Array.from({ length: 5 }, (_, i) => store.requests.create('bob', [spec(`mixed-${5 + i}`)])),
    ]);
    expect(results.map((r) => r.status)).toEqual([
      ...Array(5).fill('fulfilled'),
      'rejected',
      ...Array(5).fill('fulfilled'),
    ]);
    expect((results[5] as PromiseRejectedResult).reason).toBeInstanceOf(Error);
    expect((await rowsNamed('mixed-')).map((r) => r.name)).toHaveLength(10);
    expect(await rowsNamed('refused')).toHaveLength(0);
  });

  it('a batch with one the database refuses records none of it', async () => {
    await expect(
      store.requests.create('carol', [spec('batch-0'), refused(), spec('batch-2')]),
    ).rejects.toThrow();
    expect(await rowsNamed('batch-')).toHaveLength(0);
  });
});

describe('the answer to a submission', () => {
  it('equals a read of the request, for single and batched submissions of varied specs', async () => {
    const varied = (i: number): RequestSpec =>
      normalizeRequest({
        name: `answer-${i} é`,
        image: i % 2 ? 'debian:12' : undefined,
        command: ['sh', '-c', `echo ${i} "ü" \\ done`],
        env: { ZED: 'z', alpha: 'a', B_2: `${i}` },
        secret_env: i % 2 ? { b: 's', A: 's', a_1: 's', Z: 's', _x: 's' } : undefined,
        cwd: i % 3 ? '/work' : undefined,
        vcpus: i % 2 ? 0.25 : 3,
        ram: i % 2 ? '1.5GiB' : '200MiB',
        scratch: '3GiB',
        gpus: i % 2,
        preemptible: i % 2 === 1,
        opportunistic: i % 3 === 0,
        ram_retry_factor: i % 2 ? 1.5 : undefined,
        max_run_time: i % 2 ? '90m' : undefined,
        run_after: i % 2 ? '2030-01-02T03:04:05.678Z' : undefined,
        instance_types: i % 2 ? ['m5.large', 'c5.xlarge'] : undefined,
        priority: 10 + i,
        container_count_max: 1 + (i % 4),
        max_temp_retries: i,
        retry_on_failure: i % 2 === 0,
        labels: i % 2 ? { team: 'x', Project: 'y' } : undefined,
      });
    const batch = await store.requests.create('dora', [varied(0), varied(1), varied(2), varied(3)]);
    const [single] = await store.requests.create('dora', [varied(5)]);
    for (const answer of [...batch, single!]) {
      const read = await store.requests.get(answer.id);
      expect(answer).toStrictEqual(read);
      // and as the API sends it (key order aside: jsonb orders an object's keys)
      expect(JSON.parse(JSON.stringify(answer))).toStrictEqual(JSON.parse(JSON.stringify(read)));
      // no foreign key checks it since migration 180: the container names its own request
      const c = await store.containers.get(answer.container_id!);
      expect([c.request_id, c.owner, c.state, c.attempt]).toEqual([answer.id, 'dora', 'Queued', 1]);
    }
    expect(batch[1]!.secret_env_keys).toEqual(['A', 'Z', '_x', 'a_1', 'b']);
  });
});

describe('lone surrogates', () => {
  it('are stored and answered as U+FFFD, in text and JSON columns alike (jsonb refuses them)', async () => {
    const odd = normalizeRequest({
      name: 'lone \ud800 x',
      command: ['echo', 'a\udc00', '\ud83d\ude00'],
      env: { K: '\ud800' },
    });
    for (const made of [
      await store.requests.create('erin', [odd, spec('lone-ok')]),
      await store.requests.create('erin', [odd]),
    ]) {
      const answer = made[0]!;
      expect(answer).toStrictEqual(await store.requests.get(answer.id));
      expect(answer.name).toBe('lone \ufffd x');
      expect(answer.command).toEqual(['echo', 'a\ufffd', '\ud83d\ude00']);
      expect(answer.env).toEqual({ K: '\ufffd' });
    }
  });
});

describe("the submission's event", () => {
  it('is given by the events read, not stored: first, at the submission, once also where an older database stored it', async () => {
    const [fresh, old, retry] = await store.requests.create('fay', [
      spec('ev-1'),
      spec('ev-2'),
      spec('ev-3'),
    ]);
    const pool = store.ctx.pool;
    const stored = async (cid: string) =>
      (await pool.query('SELECT message FROM container_events WHERE container_id = $1', [cid])).rows;
    expect(await stored(fresh!.container_id!)).toEqual([]);
    const evs = await store.containerList.events(fresh!.container_id!);
    expect(evs).toStrictEqual([
      { id: 0, at: fresh!.created_at, kind: 'state', message: 'Queued: submitted', data: null },
    ]);
    // paging after it leaves it out
    expect(await store.containerList.events(fresh!.container_id!, 0)).toEqual([]);

    // a container of an older database, whose submission stored the event: read once, the stored row
    await pool.query(
      `INSERT INTO container_events (container_id, at, kind, message) VALUES ($1, $2, 'state', 'Queued: submitted'),
         ($1, $2, 'priority', 'priority 500 → 7')`,
      [old!.container_id, old!.created_at],
    );
    const olds = await store.containerList.events(old!.container_id!);
    expect(olds.map((e) => e.message)).toEqual(['Queued: submitted', 'priority 500 → 7']);
    expect(olds[0]!.id).toBeGreaterThan(0);

    // a later attempt was not submitted: its first event is the retry's own
    await pool.query('UPDATE containers SET attempt = 2 WHERE id = $1', [retry!.container_id]);
    expect(await store.containerList.events(retry!.container_id!)).toEqual([]);
  });
});
