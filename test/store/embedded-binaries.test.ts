// Which PostgreSQL binaries a server is started from (src/store/embedded.ts): a directory given names them;
// one without them is refused naming it; the system's (a distribution's package) is found when installed.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findBinaries, systemPostgresBinDir } from '../../src/store/embedded.js';

describe('PostgreSQL binaries', () => {
  it('a directory without postgres and initdb is refused, naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-bins-'));
    try {
      await expect(findBinaries(dir)).rejects.toThrow(
        `no PostgreSQL binaries in ${dir}: expected its postgres and initdb`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the system's directory, when one is installed, holds both and is used as given", async () => {
    const dir = systemPostgresBinDir();
    if (dir === null) return expect(existsSync('/usr/lib/postgresql')).toBe(false);
    expect(dir).toMatch(/^\/usr\/lib\/postgresql\/[^/]+\/bin$/);
    expect(await findBinaries(dir)).toEqual({
      initdb: join(dir, 'initdb'),
      postgres: join(dir, 'postgres'),
      source: dir,
    });
  });
});
