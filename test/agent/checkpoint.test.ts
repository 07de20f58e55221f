// The checkpoint store (src/agent/checkpoint.ts): keep, restore into the next attempt's directory, the size
// limit, forget. The end-to-end protocol (SIGUSR1, a counter continuing) is test/agent-e2e/pressure.test.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CheckpointStore } from '../../src/agent/checkpoint.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-ckpt-'));
  dirs.push(d);
  return d;
}

describe('CheckpointStore', () => {
  it('keeps a checkpoint and restores it, writable, into the next attempt; forget removes it', async () => {
    const base = await temp();
    const store = new CheckpointStore(join(base, 'store'), 1024);
    const first = join(base, 'a1');
    await mkdir(join(first, 'sub'), { recursive: true });
    await writeFile(join(first, 'count'), '41');
    await writeFile(join(first, 'sub', 'more'), 'x');
    expect(await store.keep('r-1', first)).toBe('checkpoint kept: 2 file(s), 3 bytes, for the next attempt');
    const next = join(base, 'a2');
    expect(await store.restore('r-1', next)).toBe(true);
    expect(await readFile(join(next, 'count'), 'utf8')).toBe('41');
    expect((await stat(join(next, 'count'))).mode & 0o777).toBe(0o666);
    expect((await stat(next)).mode & 0o777).toBe(0o777);
    await store.forget('r-1');
    expect(await store.restore('r-1', join(base, 'a3'))).toBe(false);
    expect(await readdir(join(base, 'a3'))).toEqual([]);
  });

  it('keeps nothing from an empty directory and refuses one over the limit, keeping the older one', async () => {
    const base = await temp();
    const store = new CheckpointStore(join(base, 'store'), 4);
    const d = join(base, 'a');
    await mkdir(d);
    expect(await store.keep('r-2', d)).toBeNull();
    await writeFile(join(d, 'ok'), '1234');
    expect(await store.keep('r-2', d)).toMatch(/^checkpoint kept/);
    await writeFile(join(d, 'big'), '12345');
    expect(await store.keep('r-2', d)).toBe(
      'checkpoint of 9 bytes not kept: over the checkpoint limit of 4 bytes',
    );
    const back = join(base, 'b');
    await store.restore('r-2', back);
    expect(await readdir(back)).toEqual(['ok']);
  });

  it('refuses a request id that is not an id (no path outside the store)', async () => {
    const store = new CheckpointStore(await temp(), 1024);
    await expect(store.restore('../x', join(await temp(), 'y'))).rejects.toThrow(
      /request id: expected an id/,
    );
  });
});
