// The order of an exit on the agent (runner.ts, docs/AGENT.md "One container"): the exit is journalled
// while the rest of the log is shipped, and only when both are done is it reported; then the container
// leaves the journal and its directory goes, and the agent runs the next one it is given.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompleteBody } from '../../src/agent/client.js';
import { Harness, until } from './harness.js';

let h: Harness;
const ids: string[] = [];

beforeAll(async () => {
  h = await Harness.create();
});
afterAll(async () => {
  await h?.cleanup();
  expect(Harness.leftCgroups(ids)).toEqual([]);
});

interface SeenAtReport {
  id: string;
  /** The container's journal entry on disk when its exit was reported. */
  journalled: { phase?: string; exit?: { exitCode: number | null } | null } | undefined;
  /** Its stdout as stored when its exit was reported. */
  stdout: string;
}

describe('an exit on the agent', () => {
  it('is journalled and its output shipped before it is reported; then forgotten, and the next one runs', async () => {
    const node = await h.node();
    const { agent } = h.startAgent(node);
    const seen: SeenAtReport[] = [];
    const complete = agent.client.complete.bind(agent.client);
    agent.client.complete = async (id: string, token: string, body: CompleteBody) => {
      const file = JSON.parse(await readFile(join(node.workDir, 'journal.json'), 'utf8')) as {
        containers: Record<string, SeenAtReport['journalled']>;
      };
      seen.push({ id, journalled: file.containers[id], stdout: await h.text(id, 'stdout') });
      return complete(id, token, body);
    };
    // Three in a row on the one node: output printed just before the exit, and one silent (nothing else
    // saves its journal entry then).
    const runs = [
      { code: 0, out: `first\nlast 0\n` },
      { code: 3, out: '' },
      { code: 0, out: `first\nlast 0\n` },
    ];
    for (const { code, out } of runs) {
      const script = out ? `echo first; sleep 0.2; echo last ${code}; exit ${code}` : `exit ${code}`;
      const id = await h.submitAndAssign(node, { command: ['sh', '-c', script] });
      ids.push(id);
      const c = await h.waitState(id, ['Complete', 'Cancelled']);
      expect(c.state).toBe('Complete');
      expect(c.exit_code).toBe(code);
      // Forgotten once reported: out of the journal, its directory removed.
      await until(
        async () => {
          const file = JSON.parse(await readFile(join(node.workDir, 'journal.json'), 'utf8')) as {
            containers: Record<string, unknown>;
          };
          return !(id in file.containers) && !existsSync(join(node.workDir, 'containers', id));
        },
        15_000,
        `container ${id} forgotten`,
      );
    }
    expect(seen.map((s) => s.id)).toEqual(ids);
    for (const [i, s] of seen.entries()) {
      expect(s.journalled?.phase).toBe('exited');
      expect(s.journalled?.exit?.exitCode).toBe(runs[i]!.code);
      expect(s.stdout).toBe(runs[i]!.out);
    }
  });
});
