// The dispatcher's Prometheus metrics (DESIGN §9): instances by state and type, spend rate, boot outcomes
// and times, create failures, scheduler pass duration. Driver operations are counted by the metrics
// decorator (src/cloud/decorators/metrics.ts) on the same registry.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Dispatcher, DispatchEvent } from './dispatcher.js';

export interface DispatcherMetrics {
  onEvent(e: DispatchEvent): void;
  passSeconds: Histogram;
}

export function dispatcherMetrics(
  registry: Registry,
  dispatcher: () => Dispatcher | null,
): DispatcherMetrics {
  const created = new Map<string, number>();
  new Gauge({
    name: 'berth_instances',
    help: 'Instances by state and type',
    labelNames: ['state', 'type'],
    registers: [registry],
    collect() {
      this.reset();
      for (const i of dispatcher()?.instances.values() ?? []) this.inc({ state: i.state, type: i.type });
    },
  });
  new Gauge({
    name: 'berth_spend_per_hour',
    help: 'Summed hourly price of live and booting instances',
    registers: [registry],
    collect() {
      let sum = 0;
      for (const i of dispatcher()?.instances.values() ?? []) if (i.state !== 'gone') sum += i.price;
      this.set(sum);
    },
  });
  const boots = new Counter({
    name: 'berth_instance_boots_total',
    help: 'Instances that booted (agent registered)',
    registers: [registry],
  });
  const bootSeconds = new Histogram({
    name: 'berth_instance_boot_seconds',
    help: 'Time from create to the agent registering',
    buckets: [1, 5, 15, 30, 60, 120, 300, 600],
    registers: [registry],
  });
  const shutdowns = new Counter({
    name: 'berth_instance_shutdowns_total',
    help: 'Instance shutdowns by reason',
    labelNames: ['reason'],
    registers: [registry],
  });
  const createFailures = new Counter({
    name: 'berth_create_failures_total',
    help: 'Failed instance creates by type',
    labelNames: ['type'],
    registers: [registry],
  });
  const nodesLost = new Counter({
    name: 'berth_nodes_lost_total',
    help: 'Nodes declared failed',
    registers: [registry],
  });
  const placed = new Counter({
    name: 'berth_containers_placed_total',
    help: 'Containers assigned to an instance',
    registers: [registry],
  });
  const errors = new Counter({
    name: 'berth_dispatch_errors_total',
    help: 'Dispatcher actions that failed (retried next pass)',
    labelNames: ['op'],
    registers: [registry],
  });
  const passSeconds = new Histogram({
    name: 'berth_scheduler_pass_seconds',
    help: 'Duration of one snapshot → plan → act pass',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  return {
    passSeconds,
    onEvent(e) {
      switch (e.kind) {
        case 'instance-created':
          created.set(e.instance, e.at.getTime());
          break;
        case 'instance-ready': {
          boots.inc();
          const t = created.get(e.instance);
          if (t !== undefined) bootSeconds.observe((e.at.getTime() - t) / 1000);
          created.delete(e.instance);
          break;
        }
        case 'instance-shutdown':
          // The reason text is free-form; its first words make a bounded label.
          shutdowns.inc({ reason: e.reason.split(/[:(;]/)[0]!.trim().slice(0, 40) });
          created.delete(e.instance);
          break;
        case 'create-failed':
          createFailures.inc({ type: e.type });
          break;
        case 'node-lost':
          nodesLost.inc();
          break;
        case 'container-placed':
          placed.inc();
          break;
        case 'error':
          errors.inc({ op: e.op });
          break;
      }
    },
  };
}
