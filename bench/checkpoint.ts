// `npm run bench -- checkpoint [--mib N] [--file PATH] [--chunk-kib K]`: where a checkpoint's time goes on
// its way agent → API → PostgreSQL → API → agent (issue 16: a vm container's ~90 MiB state file), each stage
// alone, in MB/s: GNU tar packing and unpacking, gzip level 1 and its inverse (Node's zlib), an HTTP body
// read whole by the server and one streamed, the INSERTs of its chunks in one transaction, the SELECT of
// them all at once and 8 chunks a query (text results: bytea as hex), the binary COPY in and out that the
// store uses instead (src/store/copy-binary.ts), the agent's write of the answer to a file, and the agent's
// upload as it was (tar packs the whole archive, then it is sent) and as it is (tar's output is the body: the
// agent's own ApiCheckpoints.keep and AgentClient, src/agent/checkpoint.ts). The data: the
// file given (a real QEMU state file), else N MiB of random bytes and zeros, half each.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { buffer as readBuffer } from 'node:stream/consumers';
import { gunzipSync, gzipSync } from 'node:zlib';
import { ApiCheckpoints } from '../src/agent/checkpoint.js';
import { AgentClient } from '../src/agent/client.js';
import { createPool } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { COPY_HEADER, COPY_TRAILER, copyColumnBytes, copyTuple } from '../src/store/copy-binary.js';
import { benchArgs, opt } from './args.js';

const OPTIONS = {
  mib: opt.number(96, 'MiB of data (half random, half zeros) when no --file'),
  file: opt.text(undefined, 'a file to use as the data (a real QEMU state file)'),
  'chunk-kib': opt.int(1024, 'KiB per stored chunk'),
};

function tar(args: string[], input: Buffer | null): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', args, { stdio: ['pipe', 'pipe', 'inherit'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`tar ${code}`)),
    );
    child.stdin.end(input ?? undefined);
  });
}

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('checkpoint', argv, OPTIONS);
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-ckpt-'));
  const rows: [string, number, number][] = [];
  const time = async <T>(stage: string, bytes: number, f: () => Promise<T> | T): Promise<T> => {
    const t0 = performance.now();
    const r = await f();
    const ms = performance.now() - t0;
    rows.push([stage, bytes, ms]);
    console.error(
      `${stage.padEnd(48)} ${(bytes / 1e6).toFixed(1).padStart(7)} MB ${ms.toFixed(0).padStart(6)} ms ${(bytes / 1e3 / ms).toFixed(0).padStart(6)} MB/s`,
    );
    return r;
  };
  const pg = await startEmbedded({ dataDir: join(home, 'pgdata') });
  const pool = createPool(pg.url, 2);
  const server = http.createServer();
  try {
    const data = args.file
      ? readFileSync(args.file)
      : Buffer.concat([
          randomBytes((args.mib * 1024 * 1024) / 2),
          Buffer.alloc((args.mib * 1024 * 1024) / 2),
        ]);
    const src = join(home, 'src');
    const dst = join(home, 'dst');
    for (const d of [src, dst]) rmSync(d, { recursive: true, force: true });
    await import('node:fs/promises').then((fs) => Promise.all([fs.mkdir(src), fs.mkdir(dst)]));
    writeFileSync(join(src, 'state'), data);
    console.error(
      `data: ${args.file ?? `${args.mib} MiB random + zero`} (${data.length} bytes), chunks of ${args['chunk-kib']} KiB`,
    );

    const archive = await time('tar pack (GNU tar, stdout to a Buffer)', data.length, () =>
      tar(['-c', '-f', '-', '-C', src, 'state'], null),
    );
    const gz = await time('gzip level 1 (zlib)', archive.length, () => gzipSync(archive, { level: 1 }));
    console.error(
      `  gzip: ${archive.length} → ${gz.length} bytes (${((100 * gz.length) / archive.length).toFixed(0)}%)`,
    );
    await time('gunzip (zlib)', archive.length, () => gunzipSync(gz));

    // HTTP: the body read whole (as fastify's buffer parser does) and one read chunk by chunk.
    let received: Promise<number> = Promise.resolve(0);
    server.on('request', (req, res) => {
      if (req.method === 'PUT') {
        received = (async () => {
          let n = 0;
          if (req.url === '/whole') n = (await readBuffer(req)).length;
          else for await (const b of req) n += (b as Buffer).length;
          res.end('{}');
          return n;
        })();
      } else {
        res.writeHead(200, { 'content-length': String(archive.length) });
        res.end(archive);
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const put = (path: string) =>
      new Promise<void>((resolve, reject) => {
        const req = http.request(
          {
            port,
            host: '127.0.0.1',
            path,
            method: 'PUT',
            headers: { 'content-length': String(archive.length) },
          },
          (res) => {
            res.resume();
            res.on('end', resolve);
          },
        );
        req.on('error', reject);
        req.end(archive);
      });
    await time('HTTP PUT, body read whole', archive.length, async () => {
      await put('/whole');
      await received;
    });
    await time('HTTP PUT, body streamed', archive.length, async () => {
      await put('/stream');
      await received;
    });
    // The agent's upload (the server reads it as it arrives, as the API does): packed whole then sent, as
    // before; packed into the body as it is sent, as now.
    const client = new AgentClient(`http://127.0.0.1:${port}`);
    const owner = { id: 'bench', lockToken: 'bench' };
    await time('agent: tar packs whole, then PUT (before)', archive.length, async () => {
      const whole = await tar(['-c', '-f', '-', '-C', src, 'state'], null);
      await client.putCheckpoint(owner.id, owner.lockToken, Readable.from([whole]), false);
      await received;
    });
    await time('agent: tar piped into a chunked PUT (keep)', archive.length, async () => {
      const k = await new ApiCheckpoints(client, 4 * archive.length).keep(owner, src, false);
      if (!k?.kept) throw new Error(`not kept: ${k?.line}`);
      await received;
    });
    await time(
      'HTTP GET, answer to a file (agent)',
      archive.length,
      () =>
        new Promise<void>((resolve, reject) => {
          http.get({ port, host: '127.0.0.1', path: '/' }, (res) => {
            pipeline(res, createWriteStream(join(home, 'got.tar'))).then(resolve, reject);
          });
        }),
    );

    // PostgreSQL: the chunks' INSERTs in one transaction, then their SELECT (bytea as hex text).
    await pool.query(`CREATE TABLE chunks (k text, seq integer, data bytea NOT NULL, PRIMARY KEY (k, seq))`);
    await pool.query(`ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTERNAL`);
    const size = args['chunk-kib'] * 1024;
    await time(`INSERT ${size / 1024} KiB chunks, one transaction`, archive.length, async () => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        for (let off = 0, seq = 0; off < archive.length; off += size, seq++)
          await c.query(`INSERT INTO chunks VALUES ('a', $1, $2)`, [seq, archive.subarray(off, off + size)]);
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    });
    const text = await time('SELECT all chunks, text results (hex)', archive.length, async () => {
      const r = await pool.query<{ data: Buffer }>(`SELECT data FROM chunks WHERE k = 'a' ORDER BY seq`);
      return Buffer.concat(r.rows.map((x) => x.data));
    });
    const batched = await time('SELECT 8 chunks a query', archive.length, async () => {
      const out: Buffer[] = [];
      for (let seq = 0; ; seq += 8) {
        const r = await pool.query<{ data: Buffer }>(
          `SELECT data FROM chunks WHERE k = 'a' AND seq >= $1 AND seq < $2 ORDER BY seq`,
          [seq, seq + 8],
        );
        out.push(...r.rows.map((x) => x.data));
        if (r.rows.length < 8) return Buffer.concat(out);
      }
    });
    // As the store does (src/store/copy-binary.ts): a binary COPY each way.
    await time(`COPY FROM binary, ${size / 1024} KiB rows (as the store)`, archive.length, async () => {
      const c = await pool.connect();
      try {
        async function* rows(): AsyncGenerator<Buffer> {
          yield COPY_HEADER;
          for (let off = 0, seq = 0; off < archive.length; off += size, seq++)
            yield* copyTuple([{ text: 'b' }, { int4: seq }, { bytea: archive.subarray(off, off + size) }]);
          yield COPY_TRAILER;
        }
        await pipeline(
          Readable.from(rows()),
          c.query(copyFrom(`COPY chunks (k, seq, data) FROM STDIN (FORMAT binary)`)),
        );
      } finally {
        c.release();
      }
    });
    const copied = await time('COPY TO binary (as the store)', archive.length, async () => {
      const c = await pool.connect();
      try {
        const out: Buffer[] = [];
        for await (const b of copyColumnBytes(
          c.query(
            copyTo(`COPY (SELECT data FROM chunks WHERE k = 'b' ORDER BY seq) TO STDOUT (FORMAT binary)`),
          ),
        ))
          out.push(b);
        return Buffer.concat(out);
      } finally {
        c.release();
      }
    });
    if (!text.equals(archive) || !batched.equals(archive) || !copied.equals(archive))
      throw new Error('the chunks read back differ');
    await time('tar unpack (GNU tar, stdin from a Buffer)', data.length, () =>
      tar(['-x', '-f', '-', '-C', dst], archive),
    );
    console.log(JSON.stringify(rows.map(([stage, bytes, ms]) => ({ stage, bytes, ms: Math.round(ms) }))));
    return 0;
  } finally {
    server.close();
    await pool.end();
    await pg.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
