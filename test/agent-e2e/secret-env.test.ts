// A secret environment value reaches the container through a real agent (process runtime) and appears in
// no agent log line, no journal and no file the agent keeps. The container proves it got the value by
// printing its sha256, so the value itself is nowhere but in the container's environment.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness } from './harness.js';

const SECRET = 'zz-secret-7c1b3a90';
let h: Harness;

beforeAll(async () => {
  h = await Harness.create();
});
afterAll(async () => {
  await h?.cleanup();
});

/** Every file under dir, recursively (the agent's work dir: journal, node token, run records). */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.isFile() && statSync(p).size < 10_000_000) out.push(p);
  }
  return out;
}

describe('secret_env through a real agent', () => {
  it('is set in the container like env, and the agent writes it nowhere', async () => {
    const node = await h.node();
    const { lines } = h.startAgent(node);
    const id = await h.submitAndAssign(node, {
      command: ['sh', '-c', 'echo "plain=$PLAIN"; printf %s "$API_KEY" | sha256sum'],
      env: { PLAIN: 'p' },
      secret_env: { API_KEY: SECRET },
    });
    const c = await h.waitState(id, ['Complete', 'Cancelled'], 30_000);
    expect(c).toMatchObject({ state: 'Complete', exit_code: 0 });
    const sha = createHash('sha256').update(SECRET).digest('hex');
    expect(await h.text(id, 'stdout')).toBe(`plain=p\n${sha}  -\n`);
    expect(lines.join('\n')).not.toContain(SECRET);
    for (const f of filesUnder(node.workDir))
      expect(readFileSync(f).includes(SECRET), `${f} holds the secret`).toBe(false);
  });
});
