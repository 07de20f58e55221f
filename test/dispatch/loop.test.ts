// The dispatcher's pass loop (src/dispatch/loop.ts): a poke (a create or destroy in flight finished) runs
// a pass at once, whether it comes while the loop waits or while a pass runs; otherwise the loop waits.
import { describe, expect, it } from 'vitest';
import { runPassLoop } from '../../src/dispatch/loop.js';
import { until } from '../helpers/cli.js';

describe('runPassLoop', () => {
  it('a poke during a pass or during the wait runs the next pass without waiting for the interval', async () => {
    let passes = 0;
    let pokeInPass = false;
    const loop = runPassLoop({
      tick: async () => {
        passes++;
        if (pokeInPass) {
          pokeInPass = false;
          loop.poke();
        }
      },
      notifier: null,
      intervalMs: 3_600_000, // no pass from the interval within the test
      onLeaseLost: () => {},
      onPassFailed: () => {},
    });
    try {
      await until(() => passes === 1, 10_000, 'the first pass');
      pokeInPass = true;
      loop.poke(); // during the wait: pass 2, which pokes during itself: pass 3
      await until(() => passes === 3, 10_000, 'two more passes');
      loop.poke();
      await until(() => passes === 4, 10_000, 'a fourth pass');
      expect(passes).toBe(4);
    } finally {
      await loop.stop();
    }
  });
});
