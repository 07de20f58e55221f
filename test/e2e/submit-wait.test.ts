// Ctrl-C on `berth submit --wait` through the real executable and a real signal: it stops following,
// says that the request keeps running and how to follow or cancel it, exits 130, and the request is
// untouched (issue 10 item 7).
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, berth, berthDaemon, startServer, testHome, until } from '../helpers/cli.js';

let home: string;
let env: NodeJS.ProcessEnv;
let server: ReturnType<typeof berthDaemon> | null = null;

beforeAll(async () => {
  assertBuilt();
  ({ home, env } = testHome('berth-wait-'));
  ({ server } = await startServer(home, env));
});

afterAll(async () => {
  await server?.stop();
  rmSync(home, { recursive: true, force: true });
});

describe('berth submit --wait', () => {
  it('Ctrl-C detaches: the request keeps running, the message says how to follow and cancel it, exit 130', async () => {
    // No dispatcher runs beside `berth server`: the container stays Queued, so --wait waits.
    const wait = berthDaemon(['submit', '--wait', '--', 'sleep', '1'], env);
    const id = await until(() => /r-[0-9a-z]{16}/.exec(wait.output())?.[0], 30_000, 'the request id');
    wait.child.kill('SIGINT');
    expect(await wait.exited).toBe(130);
    expect(wait.output()).toContain(
      `berth: stopped following; ${id} keeps running. Follow it again with \`berth logs -f ${id}\`, cancel it with \`berth cancel ${id}\`.`,
    );
    const shown = JSON.parse(berth(['show', id, '--json'], env).stdout);
    expect(shown).toMatchObject({ state: 'Committed', container_state: 'Queued' });
  });
});
