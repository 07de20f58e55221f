// berth submit's --opportunistic and --ram-retry-factor become the API's fields; a factor that is not a
// number is refused before anything is sent (its range is the API's to check, with the field named).
import { describe, expect, it } from 'vitest';
import { buildRequestBody } from '../../src/cli/commands/submit.js';
import { pauseWord } from '../../src/cli/commands/pause.js';

const base = { env: [], secretEnv: [], instanceType: [] };

describe('submit flags of issue 16', () => {
  it('--opportunistic and --ram-retry-factor', () => {
    expect(buildRequestBody({ ...base, opportunistic: true, ramRetryFactor: '1.5' }, ['x'])).toMatchObject({
      opportunistic: true,
      ram_retry_factor: 1.5,
    });
    const plain = buildRequestBody(base, ['x']);
    expect(plain).not.toHaveProperty('opportunistic');
    expect(plain).not.toHaveProperty('ram_retry_factor');
    expect(() => buildRequestBody({ ...base, ramRetryFactor: 'lots' }, ['x'])).toThrow(
      '--ram-retry-factor: expected a number such as 2 or 1.5, got "lots"',
    );
  });

  it('pause words: paused once the agent froze it, pausing/resuming while it has not yet', () => {
    const c = (pause_wanted: boolean, paused: boolean, state = 'Running' as const) => ({
      state,
      pause_wanted,
      paused,
    });
    expect(pauseWord(c(true, true))).toBe('paused');
    expect(pauseWord(c(true, false))).toBe('pausing');
    expect(pauseWord(c(false, true))).toBe('resuming');
    expect(pauseWord(c(false, false))).toBeNull();
  });
});
