// The berth CLI run in this process (main()) against a real API server on a real port: fast, and every
// byte the command prints is captured. An "agent" drives containers through the API as the dispatcher
// and a node would (lock, assign, start, append logs, complete), so commands that follow work see it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { testApi } from './api.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export async function cliWorld() {
  const t = await testApi();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = t.app.server.address() as { port: number };
  const url = `http://127.0.0.1:${port}`;
  // Removed by close(): an afterAll registered here, inside the caller's beforeAll, never ran.
  const home = mkdtempSync(join(tmpdir(), 'berth-cli-'));
  const node = await t.node();
  let out = { stdout: '', stderr: '' };

  /**
   * Runs `berth ARGS` as `token` (default alice). Output is captured while it runs; `live` sees it as it
   * comes (for commands that follow).
   */
  async function berth(args: string[], token = t.tokens.alice, live?: CliRun): Promise<CliRun> {
    const run = live ?? { code: -1, stdout: '', stderr: '' };
    out = run;
    const spies = [
      vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
        run.stdout += String(c);
        return true;
      }),
      vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
        run.stderr += String(c);
        return true;
      }),
      vi.spyOn(console, 'log').mockImplementation((...p: unknown[]) => {
        run.stdout += `${p.join(' ')}\n`;
      }),
      vi.spyOn(console, 'error').mockImplementation((...p: unknown[]) => {
        run.stderr += `${p.join(' ')}\n`;
      }),
    ];
    try {
      run.code = await main(['node', 'berth', '--home', home, '--api-url', url, '--token', token, ...args]);
      return run;
    } finally {
      for (const s of spies) s.mockRestore();
    }
  }

  const ok = <R extends { statusCode: number; body: string }>(r: R): R => {
    if (r.statusCode >= 300) throw new Error(`${r.statusCode} ${r.body}`);
    return r;
  };

  /** Starts one attempt of a container as the dispatcher and an agent would; returns its lock token. */
  async function startAttempt(containerId: string): Promise<string> {
    ok(
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: '/v1/containers/lock',
        payload: { dispatcher_id: 'd-cli', ids: [containerId] },
      }),
    );
    ok(
      await t.call(t.tokens.dispatcher, {
        method: 'POST',
        url: `/v1/containers/${containerId}/assign`,
        payload: { dispatcher_id: 'd-cli', instance_id: node.instanceId, node_id: node.id },
      }),
    );
    const ping = ok(
      await t.call(node.token, {
        method: 'POST',
        url: `/v1/nodes/${node.id}/ping`,
        payload: { state: 'idle', running: [] },
      }),
    );
    const order = (ping.json().start as { id: string; lock_token: string }[]).find(
      (s) => s.id === containerId,
    )!;
    ok(
      await t.call(node.token, {
        method: 'POST',
        url: `/v1/containers/${containerId}/start`,
        payload: { lock_token: order.lock_token },
      }),
    );
    return order.lock_token;
  }

  /**
   * Runs one attempt of a container to its end, as the dispatcher and an agent would: output, then exit,
   * with the usage the agent measured when given.
   */
  async function runAttempt(
    containerId: string,
    output: string,
    exitCode: number,
    usage?: { peak_ram: number; cpu_seconds: number; wall_ms: number },
  ): Promise<void> {
    const lockToken = await startAttempt(containerId);
    const call = (path: string, payload: object) =>
      t.call(node.token, { method: 'POST', url: `/v1/containers/${containerId}/${path}`, payload });
    ok(
      await call('logs', {
        lock_token: lockToken,
        chunks: [{ seq: 0, stream: 'stdout', data: output }],
      }),
    );
    ok(
      await call('complete', {
        lock_token: lockToken,
        exit_code: exitCode,
        oom_killed: false,
        ...(usage === undefined ? {} : { usage }),
      }),
    );
  }

  /** The request's current container id. */
  async function current(requestId: string): Promise<string> {
    return (await t.store.requests.get(requestId)).container_id!;
  }

  /** Removes the world's BERTH_HOME (call it from the test file's afterAll). */
  const close = () => rmSync(home, { recursive: true, force: true });
  return { t, url, home, node, berth, startAttempt, runAttempt, current, output: () => out, close };
}
