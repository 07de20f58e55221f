// The agent's life around its containers: the order of an exit's journal, log and report (runner.ts),
// killed and restarted (re-attach, exits that happened while it was down, logs resumed), the API away for
// a while, a revoked token, drain, a refused registration.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentFatalError } from '../../src/agent/agent.js';
import type { CompleteBody } from '../../src/agent/client.js';
import { containerCgroup, probeCgroups } from '../../src/agent/runtimes/cgroup.js';
import { isAlive } from '../../src/agent/runtimes/procfs.js';
import { Harness, until } from './harness.js';

const ids: string[] = [];
const h = Harness.forFile(ids);

const numbered = (n: number, pauseEvery: number, exit: number) => [
  'sh',
  '-c',
  `i=0; while [ $i -lt ${n} ]; do echo "line $i"; i=$((i+1)); [ $((i % ${pauseEvery})) = 0 ] && sleep 0.2; done; exit ${exit}`,
];
const expected = (n: number) => Array.from({ length: n }, (_, i) => `line ${i}\n`).join('');

async function shimOf(workDir: string, cid: string) {
  const runJson = join(workDir, 'containers', cid, 'run', 'run.json');
  await until(() => existsSync(runJson), 10_000, `${runJson}`);
  return (JSON.parse(await readFile(runJson, 'utf8')) as { shim: { pid: number; startTicks: number } }).shim;
}

interface SeenAtReport {
  id: string;
  /** The container's journal entry on disk when its exit was reported. */
  journalled: { phase?: string; exit?: { exitCode: number | null } | null } | undefined;
  /** Its stdout as stored when its exit was reported. */
  stdout: string;
}

describe('agent lifecycle', () => {
  it('an exit is journalled and its output shipped before it is reported; then forgotten, and the next one runs', async () => {
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

  it('a start refused (cancelled meanwhile) removes what was prepared while it was reported: no directory, no cgroup', async () => {
    const node = await h.node();
    const { agent, lines } = h.startAgent(node);
    const host = await probeCgroups();
    const prepared = async (id: string) => {
      const dirs = host.unusable === null ? await containerCgroup(host, id).dirs() : [];
      return dirs.filter((d) => existsSync(d)).length;
    };
    const start = agent.client.start.bind(agent.client);
    agent.client.start = async (id: string, token: string) => {
      // The runtime prepares while the start is reported: its scratch dir and cgroup appear meanwhile.
      await until(
        async () =>
          existsSync(join(node.workDir, 'containers', id, 'run', 'scratch')) &&
          (host.unusable !== null || (await prepared(id)) > 0),
        15_000,
        `container ${id} prepared while its start is reported`,
      );
      await h.store.containers.cancel(
        id,
        { kind: 'user', owner: null },
        'user',
        'cancelled before its start',
      );
      return start(id, token);
    };
    const cid = await h.submitAndAssign(node, { command: ['sh', '-c', 'echo must not run'] });
    ids.push(cid);
    await until(
      () => lines.includes(`container ${cid}: the API refused the start; not running it`),
      15_000,
      'the refused start',
    );
    await until(
      async () => !existsSync(join(node.workDir, 'containers', cid)) && (await prepared(cid)) === 0,
      15_000,
      `container ${cid}'s directory and cgroup removed`,
    );
    expect((await h.store.containers.get(cid)).state).toBe('Cancelled');
    expect(await h.text(cid, 'stdout')).toBe('');
  });

  it('SIGKILLed and restarted: re-attaches, reports the exit that happened meanwhile, loses no log line', async () => {
    const node = await h.node();
    const first = h.spawnAgent(node);
    const ended = await h.submitAndAssign(node, { command: numbered(3000, 500, 7) });
    const still = await h.submitAndAssign(node, {
      command: ['sh', '-c', 'echo before; sleep 4; echo after'],
    });
    ids.push(ended, still);
    await h.waitState(ended, ['Running']);
    await h.waitState(still, ['Running']);
    await until(async () => (await h.text(ended, 'stdout')).length > 0, 10_000, 'some output shipped');
    first.child.kill('SIGKILL');
    await first.exited;
    // `ended` finishes while no agent runs: its exit code is only on disk.
    await until(
      () => existsSync(join(node.workDir, 'containers', ended, 'run', 'exit')),
      20_000,
      'the exit file',
    );
    expect((await h.store.containers.get(ended)).state).toBe('Running');

    const second = h.spawnAgent(node); // the secret is used up: it must use the saved token
    const a = await h.waitState(ended, ['Complete', 'Cancelled'], 30_000);
    expect(a).toMatchObject({ state: 'Complete', exit_code: 7 });
    expect(await h.text(ended, 'stdout')).toBe(expected(3000));
    const b = await h.waitState(still, ['Complete', 'Cancelled'], 30_000);
    expect(b).toMatchObject({ state: 'Complete', exit_code: 0 });
    expect(await h.text(still, 'stdout')).toBe('before\nafter\n');
    expect(second.output()).toMatch(/using the saved node token/);
    expect(second.output()).toMatch(new RegExp(`"container":"${still}".*"msg":"re-attached`));
    // Both are forgotten once reported.
    await until(
      async () =>
        Object.keys(JSON.parse(await readFile(join(node.workDir, 'journal.json'), 'utf8')).containers)
          .length === 0,
      10_000,
      'an empty journal',
    );
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('the API down for a few seconds loses no log line and the exit is reported when it is back', async () => {
    const node = await h.node();
    const { lines } = h.startAgent(node);
    const cid = await h.submitAndAssign(node, { command: numbered(4000, 400, 0) });
    ids.push(cid);
    await h.waitState(cid, ['Running']);
    await shimOf(node.workDir, cid); // the agent heard the start was recorded and started it
    await h.apiDown();
    try {
      // The container goes on printing and ends while the API is away.
      await until(() => existsSync(join(node.workDir, 'containers', cid, 'run', 'exit')), 30_000, 'the exit');
      await until(() => lines.some((l) => /ping failed|retry/.test(l)), 10_000, 'the agent to notice');
    } finally {
      await h.apiUp(); // also when it failed: the other tests share this API
    }
    const c = await h.waitState(cid, ['Complete', 'Cancelled'], 60_000);
    expect(c).toMatchObject({ state: 'Complete', exit_code: 0 });
    expect(await h.text(cid, 'stdout')).toBe(expected(4000));
  });

  it('a revoked node token makes the agent kill what it runs and stop', async () => {
    const node = await h.node();
    const { run, lines } = h.startAgent(node);
    const cid = await h.submitAndAssign(node, { command: ['sleep', '1000'] });
    ids.push(cid);
    await h.waitState(cid, ['Running']);
    const shim = await shimOf(node.workDir, cid);
    await h.store.tokens.revokeNode(node.id);
    const err = await run;
    expect(err).toBeInstanceOf(AgentFatalError);
    expect((err as Error).message).toMatch(/node token revoked/);
    expect(lines.join('\n')).toMatch(/killing 1 container/);
    await until(async () => !(await isAlive(shim)), 10_000, 'the container to be gone');
  });

  it('drain: starts nothing new, reports drained once empty', async () => {
    const node = await h.node();
    const { lines } = h.startAgent(node);
    const running = await h.submitAndAssign(node, { command: ['sh', '-c', 'sleep 2; echo finished'] });
    ids.push(running);
    await h.waitState(running, ['Running']);
    // An operator drains the node (the store notifies the node, which wakes its long poll).
    await h.store.nodes.drain(node.id);
    await until(() => lines.some((l) => l.startsWith('draining')), 15_000, 'the agent to hear the drain');
    const late = await h.submitAndAssign(node, { command: ['echo', 'must not run'] });
    expect((await h.waitState(running, ['Complete'])).exit_code).toBe(0);
    await until(async () => (await h.store.nodes.get(node.id)).state === 'drained', 15_000, 'drained');
    expect((await h.store.containers.get(late)).state).toBe('Locked');
  });

  it('a refused registration exits non-zero with a clear message', async () => {
    const node = await h.node();
    const { writeFile } = await import('node:fs/promises');
    await writeFile(node.secretFile, 'bs_wrong', { mode: 0o600 });
    const a = h.spawnAgent(node);
    expect(await a.exited).toBe(3);
    expect(a.output()).toMatch(/registration of node \S+ refused: HTTP 401/);
  });

  it('bad flags are named', async () => {
    const node = await h.node();
    const a = h.spawnAgent(node, ['--kill-grace', 'soon']);
    expect(await a.exited).toBe(2);
    expect(a.output()).toMatch(/kill_grace \(from --kill-grace\): expected a duration/);
  });
});
