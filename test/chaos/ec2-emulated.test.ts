// The chaos run on the emulated EC2 (src/chaos/ec2-emulated.ts), small: 24 containers through a real
// `berth server`, a `berth dispatch` on the ec2 driver that is SIGKILLed once and started again, and agents
// booted by the emulator, with lost answers, capacity and quota errors, throttling and spot interruptions
// injected. Every check must hold, every kind of fault must have fired, and nothing may be left behind.
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect } from 'vitest';
import { runEc2Chaos } from '../../src/chaos/ec2-emulated.js';
import { motoUnavailable } from '../../src/cloud/ec2-emu/moto.js';
import { assertBuilt, processesMentioning } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

const it = itIf(motoUnavailable());

describe('chaos on the emulated EC2', () => {
  it(
    '24 containers through lost answers, capacity, quota, throttling, spot interruptions and a dispatcher kill: every check holds',
    { timeout: 420_000 },
    async () => {
      assertBuilt();
      const before = new Set(readdirSync(tmpdir()).filter((f) => f.startsWith('berth-chaos-ec2-')));
      const lines: string[] = [];
      const result = await runEc2Chaos({
        containers: 24,
        seed: 1,
        wallLimitMs: 360_000,
        log: (l) => lines.push(l),
      });
      const said = lines.join('\n').slice(-6000);
      expect(result.checks.length, 'number of checks').toBeGreaterThanOrEqual(9);
      for (const c of result.checks) expect.soft(c.ok, `check "${c.name}": ${c.detail}\n${said}`).toBe(true);
      // The fault check reads these; asserted here as well so that a failure names the missing kind.
      const i = result.injected;
      expect.soft(i['RunInstances answers lost'], 'lost answers').toBeGreaterThan(0);
      expect.soft(i['RunInstances replayed for a repeated ClientToken'], 'replays').toBeGreaterThan(0);
      expect.soft(i['capacity errors (InsufficientInstanceCapacity)'], 'capacity').toBeGreaterThan(0);
      expect.soft(i['quota errors (VcpuLimitExceeded)'], 'quota').toBeGreaterThan(0);
      expect.soft(i['throttled calls (RequestLimitExceeded)'], 'throttling').toBeGreaterThan(0);
      expect.soft(i['spot interruptions'], 'spot interruptions').toBe(2);
      expect.soft(i['dispatcher kills'], 'dispatcher kills').toBe(1);
      expect(result.ok, 'the run as a whole').toBe(true);

      // Nothing left: its home, its processes (server, dispatchers, agents, PostgreSQL).
      const left = readdirSync(tmpdir()).filter((f) => f.startsWith('berth-chaos-ec2-') && !before.has(f));
      expect(left).toEqual([]);
      expect(processesMentioning('berth-chaos-ec2-').filter((p) => !/vitest/.test(p))).toEqual([]);
    },
  );
});
