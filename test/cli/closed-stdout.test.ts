// A reader that goes away before berth writes (`berth usage --json | head -1`, a pager quit early) is not
// a crash: berth stops quietly with 141, the status of a program ended by SIGPIPE, and no stack trace.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, BIN, ROOT } from '../helpers/cli.js';

beforeAll(() => assertBuilt());

describe('stdout closed by its reader', () => {
  it('berth plan stops with 141 and says nothing when its stdout is a pipe nobody reads', async () => {
    const snapshot = join(ROOT, 'test', 'dispatch', 'snapshots', 'example.json');
    const child = spawn(process.execPath, [BIN, 'plan', '--snapshot', snapshot], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Closed before the child has even loaded its modules: its first write meets EPIPE.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    const code = await new Promise<number | null>((done) => child.on('close', (c) => done(c)));
    expect(stderr).toBe('');
    expect(code).toBe(141);
  });
});
