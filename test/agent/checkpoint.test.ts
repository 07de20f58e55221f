// The agent's side of checkpoints (src/agent/checkpoint.ts): packing a container's checkpoint directory
// into a tar archive (regular files and directories only), the size limit, and unpacking it, writable,
// into the next attempt's directory. The API side is test/api/checkpoints.test.ts; the whole path (a
// counter reclaimed on one instance, continuing on another) is test/agent-e2e/pressure.test.ts. Here the
// API is a map holding what was put: the two calls are all ApiCheckpoints uses of the client.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { ApiCheckpoints } from '../../src/agent/checkpoint.js';
import { notTar } from '../../src/model/checkpoint.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-ckpt-'));
  dirs.push(d);
  return d;
}

/** What the API keeps, by container (a request's attempts share it in the real store). */
function memoryApi() {
  const kept: { tar: Buffer | null; reclaimed: boolean | null; wholeState: string | null } = {
    tar: null,
    reclaimed: null,
    wholeState: null,
  };
  return {
    kept,
    client: {
      // As the API: kept only when the body ends (a stream that fails keeps nothing).
      putCheckpoint: async (
        _id: string,
        _token: string,
        tar: Readable,
        reclaimed: boolean,
        _signal?: AbortSignal,
        wholeState?: string,
      ) => {
        kept.tar = await buffer(tar);
        kept.reclaimed = reclaimed;
        kept.wholeState = wholeState ?? null;
      },
      getCheckpoint: async (_id: string, _token: string, unpack: (body: Readable) => Promise<void>) => {
        if (!kept.tar) return null;
        await unpack(Readable.from([kept.tar]));
        return { bytes: kept.tar.length, wholeState: kept.wholeState };
      },
    },
  };
}
const owner = { id: 'c-1', lockToken: '1.x' };

describe('ApiCheckpoints', () => {
  it('sends a tar of the files and directories and restores it, writable, into the next attempt', async () => {
    const base = await temp();
    const api = memoryApi();
    const store = new ApiCheckpoints(api.client, 1024 * 1024);
    const first = join(base, 'a1');
    await mkdir(join(first, 'sub'), { recursive: true });
    await writeFile(join(first, 'count'), '41');
    await writeFile(join(first, 'sub', 'more'), 'x');
    // A link the container planted is not carried (it could point anywhere on the next host).
    await symlink('/etc/hostname', join(first, 'link'));
    expect(await store.keep(owner, first, true)).toEqual({
      kept: true,
      line: expect.stringMatching(
        /^checkpoint kept: 2 file\(s\), 3 bytes \(a \d+-byte archive, packed and sent in \d+ ms\)/,
      ),
    });
    expect(api.kept.reclaimed).toBe(true);
    expect(notTar(api.kept.tar!)).toBeNull();

    const next = join(base, 'a2');
    expect(await store.restore(owner, next, true)).toMatchObject({
      bytes: api.kept.tar!.length,
      wholeState: null,
    });
    // What a runtime saved whole says so, through the API and back.
    await store.keep(owner, first, true, 'vm');
    expect(api.kept.wholeState).toBe('vm');
    expect((await store.restore(owner, join(base, 'a3'), true))?.wholeState).toBe('vm');
    expect(await readFile(join(next, 'count'), 'utf8')).toBe('41');
    expect(await readFile(join(next, 'sub', 'more'), 'utf8')).toBe('x');
    expect((await readdir(next)).sort()).toEqual(['count', 'sub']);
    expect((await stat(join(next, 'count'))).mode & 0o777).toBe(0o666);
    expect((await stat(next)).mode & 0o777).toBe(0o777);
  });

  it('restores nothing when the start order says none is kept, but makes the directory', async () => {
    const api = memoryApi();
    api.kept.tar = Buffer.alloc(1024); // would fail to unpack, were it asked for
    const next = join(await temp(), 'a');
    expect(await new ApiCheckpoints(api.client, 1024).restore(owner, next, false)).toBeNull();
    expect(await readdir(next)).toEqual([]);
    expect((await stat(next)).mode & 0o777).toBe(0o777);
  });

  it('sends nothing from an empty directory, and refuses one over the limit (files or archive)', async () => {
    const base = await temp();
    const api = memoryApi();
    const d = join(base, 'a');
    await mkdir(d);
    expect(await new ApiCheckpoints(api.client, 4).keep(owner, d, false)).toBeNull();
    await writeFile(join(d, 'big'), '12345');
    expect(await new ApiCheckpoints(api.client, 4).keep(owner, d, false)).toEqual({
      kept: false,
      line: 'checkpoint of 5 bytes not kept: over the checkpoint limit of 4 bytes',
    });
    // 5 bytes of files, but the archive has headers and padding: tar is stopped once it passes 2000 bytes.
    expect((await new ApiCheckpoints(api.client, 2000).keep(owner, d, false))?.line).toMatch(
      /^checkpoint of at least \d+ bytes not kept: over the checkpoint limit of 2000 bytes/,
    );
    expect(api.kept.tar).toBeNull();
  });
});
