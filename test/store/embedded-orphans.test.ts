// Relocated PostgreSQL data directories (src/store/embedded.ts, reachableDataDir) are removed once the
// BERTH_HOME they stand for is gone and their server is not running; nothing else is touched.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collectOrphanedDataDirs } from '../../src/store/embedded.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  cleanup.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function relocated(root: string, name: string, standsFor: string | null, pid?: number): string {
  const dataDir = join(root, name);
  mkdirSync(dataDir);
  writeFileSync(join(dataDir, 'PG_VERSION'), '17\n');
  if (pid !== undefined) writeFileSync(join(dataDir, 'postmaster.pid'), `${pid}\n${dataDir}\n`);
  writeFileSync(`${dataDir}.password`, 'pw\n');
  writeFileSync(`${dataDir}.port`, '5432\n');
  if (standsFor !== null) writeFileSync(`${dataDir}.home`, `${standsFor}\n`);
  return dataDir;
}

describe('relocated data directories', () => {
  it('removes the one whose home is gone, keeps a live home, a running server and unrecorded ones', () => {
    const root = tempDir('berth-reloc-');
    const liveHome = tempDir('berth-home-');
    const goneHome = join(tmpdir(), `berth-gone-${process.pid}-${Date.now()}`);
    const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
    cleanup.push(() => sleeper.kill('SIGKILL'));

    const orphan = relocated(root, 'pg-aaaaaaaaaaaa', join(goneHome, 'pg'));
    const kept = relocated(root, 'pg-bbbbbbbbbbbb', join(liveHome, 'pg'));
    const running = relocated(root, 'pg-cccccccccccc', join(goneHome, 'pg2'), sleeper.pid);
    const unrecorded = relocated(root, 'pg-dddddddddddd', null);

    expect(collectOrphanedDataDirs(root)).toEqual([orphan]);
    for (const f of [orphan, `${orphan}.password`, `${orphan}.port`, `${orphan}.home`])
      expect(existsSync(f)).toBe(false);
    for (const d of [kept, running, unrecorded]) {
      expect(existsSync(join(d, 'PG_VERSION'))).toBe(true);
      expect(existsSync(`${d}.password`)).toBe(true);
    }
    // Once its server is gone, the second orphan goes too.
    sleeper.kill('SIGKILL');
    return new Promise<void>((done) => sleeper.once('exit', () => done())).then(() => {
      expect(collectOrphanedDataDirs(root)).toEqual([running]);
    });
  });

  it('a root that does not exist removes nothing', () => {
    expect(collectOrphanedDataDirs(join(tmpdir(), `berth-none-${process.pid}-${Date.now()}`))).toEqual([]);
  });
});
