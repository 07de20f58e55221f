// The agent's journal: a save() resolves only once its change is on disk, however concurrent saves
// interleave. (A save that returned early once let the API record a container as Running that the
// journal did not hold; an agent SIGKILLed at that moment forgot the container for good.)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Journal, newLogCursor, type JournalEntry } from '../../src/agent/journal.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function entry(id: string): JournalEntry {
  return {
    id,
    lockToken: `lt-${id}`,
    phase: 'starting',
    runtime: 'process',
    runDir: `/nonexistent/${id}`,
    startedAt: 0,
    maxRunTimeMs: null,
    scratch: 0,
    startReported: false,
    killReason: null,
    exit: null,
    log: newLogCursor(),
  };
}

async function fresh(): Promise<{ journal: Journal; path: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-journal-'));
  dirs.push(dir);
  const path = join(dir, 'journal.json');
  return { journal: await Journal.load(path), path };
}

function onDisk(path: string): string[] {
  return Object.keys((JSON.parse(readFileSync(path, 'utf8')) as { containers: object }).containers).sort();
}

describe('agent journal', () => {
  it('a save made while another is writing resolves only after a write that includes its change', async () => {
    const { journal, path } = await fresh();
    journal.containers.set('c-a', entry('c-a'));
    const first = journal.save(); // starts writing {c-a}
    journal.containers.set('c-b', entry('c-b'));
    const second = journal.save().then(() => onDisk(path)); // must wait for a write with c-b
    await first;
    expect(await second).toEqual(['c-a', 'c-b']);
  });

  it('many interleaved saves: each sees its own change on disk when it resolves', async () => {
    const { journal, path } = await fresh();
    const seen: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      const id = `c-${String(i).padStart(2, '0')}`;
      journal.containers.set(id, entry(id));
      seen.push(
        journal.save().then(() => {
          expect(onDisk(path)).toContain(id);
        }),
      );
      if (i % 3 === 0) await Promise.resolve(); // let some writes start between changes
    }
    await Promise.all(seen);
    expect(onDisk(path)).toHaveLength(20);
    const reloaded = await Journal.load(path);
    expect([...reloaded.containers.keys()].sort()).toEqual(onDisk(path));
  });

  it('a removal is on disk when its save resolves', async () => {
    const { journal, path } = await fresh();
    journal.containers.set('c-a', entry('c-a'));
    journal.containers.set('c-b', entry('c-b'));
    await journal.save();
    const pending = journal.save();
    journal.containers.delete('c-a');
    await journal.save();
    await pending;
    expect(onDisk(path)).toEqual(['c-b']);
  });

  it('a journal that is not JSON is refused with the path and what to do', async () => {
    const { path } = await fresh();
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path, '{not json');
    await expect(Journal.load(path)).rejects.toThrow(
      /journal .*journal\.json is not valid JSON.*move it away/,
    );
  });

  it("an earlier agent's spot notice (its `interrupted` field) loads as a hand-back, so the restart still reports it as one", async () => {
    const { path } = await fresh();
    const old = {
      ...entry('c-old'),
      killReason: 'spot interruption: soon',
      interrupted: 'spot interruption: soon',
    };
    writeFileSync(
      path,
      JSON.stringify({ version: 1, containers: { 'c-old': old, 'c-plain': entry('c-plain') } }),
    );
    const journal = await Journal.load(path);
    const got = journal.containers.get('c-old')!;
    expect(got.handBack).toEqual({ cause: 'spot', reason: 'spot interruption: soon' });
    expect('interrupted' in got).toBe(false);
    expect(journal.containers.get('c-plain')!.handBack).toBeUndefined();
  });
});
