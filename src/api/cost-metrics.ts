// Prometheus counters for spend (docs/COST.md): what instances have cost so far, and their billed hours,
// by type, read from the instance records at scrape (one aggregate over the instances table, no containers).
import { Counter, type Registry } from 'prom-client';
import { instanceSpend, type InstanceSpend } from '../store/cost.js';
import type { Store } from '../store/store.js';

export function costMetrics(store: Store, registry: Registry): void {
  // Both counters come from one query per scrape: the first collect() reads, the second reuses it.
  let pending: Promise<InstanceSpend[]> | null = null;
  const read = () => {
    pending ??= instanceSpend(store.ctx.pool, null, store.ctx.clock.now()).finally(() =>
      setImmediate(() => (pending = null)),
    );
    return pending;
  };
  const counters: [string, string, (r: InstanceSpend) => number][] = [
    [
      'berth_spend_total',
      'What instances have cost so far (price × billed time), by instance type, in the price unit',
      (r) => r.cost,
    ],
    ['berth_instance_hours_total', 'Billed instance hours so far, by instance type', (r) => r.hours],
  ];
  for (const [name, help, value] of counters)
    new Counter({
      name,
      help,
      labelNames: ['type'],
      registers: [registry],
      async collect() {
        const rows = await read();
        this.reset();
        for (const r of rows) this.inc({ type: r.type }, value(r));
      },
    });
}
