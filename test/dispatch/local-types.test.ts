// The instance types `berth up` uses when the configuration names none: each has some scratch, so a
// request for scratch space is placed instead of cancelled as unsatisfiable (issue 10: every --scratch
// request failed).
import { describe, expect, it } from 'vitest';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import { ctr, GiB, snap } from './builders.js';

describe('default local instance types', () => {
  it('offer scratch, and a 5GiB scratch request gets an instance rather than a cancel', () => {
    const cfg = parseDispatchConfig({});
    expect(cfg.instanceTypes.length).toBeGreaterThan(0);
    for (const t of cfg.instanceTypes) expect(t.scratch, t.name).toBeGreaterThanOrEqual(10 * GiB);
    const p = plan(
      snap({
        types: cfg.instanceTypes,
        containers: [ctr('c1', { ram: 256 * 1024 ** 2, vcpus: 0.5, scratch: 5 * GiB })],
      }),
    );
    expect(p.actions.map((a) => a.op)).toEqual(['lock', 'create']);
  });
});
