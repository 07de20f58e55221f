// The quick start on a machine without bubblewrap (rule: two commands on a fresh machine with Node.js):
// `berth up --demo` runs the demo's own containers unsandboxed and says so; anything else keeps the
// sandbox setting, so image-less containers stay refused where bubblewrap cannot run (issue 10 item 1).
import { describe, expect, it } from 'vitest';
import { demoSandbox } from '../../src/cli/commands/up.js';
import { loadConfig } from '../../src/config/options.js';
import { probeSandbox } from '../../src/agent/runtimes/sandbox.js';
import { itIf } from '../helpers/needs.js';

const real = await probeSandbox('bwrap');
const base = loadConfig({ home: '/nonexistent-home', bwrap: '/nonexistent/bwrap' }, {});

describe('berth up --demo without bubblewrap', () => {
  it('the demo falls back to plain processes and says why and what to do', async () => {
    const { cfg, note } = await demoSandbox(base, true);
    expect(cfg.process_sandbox).toBe('none');
    expect(note).toMatch(
      /bubblewrap not found \(\/nonexistent\/bwrap.*the demo's own containers run as plain processes/,
    );
    expect(note).toMatch(/without --demo such containers are refused/);
  });

  it('without --demo nothing changes: such containers stay refused', async () => {
    expect(await demoSandbox(base, false)).toEqual({ cfg: base, note: null });
  });

  it('an explicit --process-sandbox none is left as it is, with no extra note', async () => {
    const none = { ...base, process_sandbox: 'none' as const };
    expect(await demoSandbox(none, true)).toEqual({ cfg: none, note: null });
  });

  itIf(typeof real === 'string' ? `bubblewrap cannot run here: ${real}` : null)(
    'where bubblewrap runs, the demo keeps the sandbox',
    async () => {
      const cfg = { ...base, bwrap: 'bwrap' };
      expect(await demoSandbox(cfg, true)).toEqual({ cfg, note: null });
    },
  );
});
