// Prometheus metrics of the API process: HTTP traffic, plus queue gauges read from the database at scrape.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Store } from '../store/store.js';

export interface ApiMetrics {
  registry: Registry;
  http: Counter<'method' | 'route' | 'status'>;
  httpSeconds: Histogram<'route'>;
  queueToStart: Histogram;
}

export function apiMetrics(store: Store, registry = new Registry()): ApiMetrics {
  const http = new Counter({
    name: 'berth_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const httpSeconds = new Histogram({
    name: 'berth_http_request_duration_seconds',
    help: 'HTTP request duration',
    labelNames: ['route'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  const queueToStart = new Histogram({
    name: 'berth_queue_to_start_seconds',
    help: 'Time from a container entering the queue to its start',
    buckets: [0.05, 0.1, 0.25, 1, 5, 15, 60, 300, 1800, 3600],
    registers: [registry],
  });
  new Gauge({
    name: 'berth_containers',
    help: 'Containers by state',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const r = await store.ctx.pool.query(`SELECT state, count(*)::int AS n FROM containers GROUP BY state`);
      this.reset();
      for (const s of ['Queued', 'Locked', 'Running', 'Complete', 'Cancelled']) this.set({ state: s }, 0);
      for (const row of r.rows) this.set({ state: row.state }, row.n);
    },
  });
  new Gauge({
    name: 'berth_requests',
    help: 'Container requests by state',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const r = await store.ctx.pool.query(
        `SELECT state, count(*)::int AS n FROM container_requests GROUP BY state`,
      );
      this.reset();
      for (const s of ['Committed', 'Final']) this.set({ state: s }, 0);
      for (const row of r.rows) this.set({ state: row.state }, row.n);
    },
  });
  new Gauge({
    name: 'berth_nodes',
    help: 'Nodes by state',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const r = await store.ctx.pool.query(`SELECT state, count(*)::int AS n FROM nodes GROUP BY state`);
      this.reset();
      for (const row of r.rows) this.set({ state: row.state }, row.n);
    },
  });
  return { registry, http, httpSeconds, queueToStart };
}
