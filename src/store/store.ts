// The store: every module over one pool, one clock, one source of randomness.
import { systemClock, type Clock, type Rng } from '../model/clock.js';
import { Checkpoints } from './checkpoints.js';
import { ContainerList } from './container-list.js';
import { Containers } from './containers.js';
import { Costs } from './cost.js';
import { Dashboard } from './dashboard.js';
import type { StoreContext } from './context.js';
import type { Db } from './db.js';
import { Instances } from './instances.js';
import { Logs } from './logs.js';
import { Nodes } from './nodes.js';
import { Pauses } from './pause.js';
import { Reports } from './reports.js';
import { Requests } from './requests.js';
import { Settings } from './settings.js';
import { Tokens } from './tokens.js';
import { Transitions } from './transitions/index.js';
import { UsageQueries } from './usage.js';
import { Wake } from './wake.js';

export class Store {
  readonly ctx: StoreContext;
  readonly tokens: Tokens;
  /** Every container transition (src/store/transitions/): the one writer of container states. */
  readonly transitions: Transitions;
  /** Agents' reports, group-committed. */
  readonly reports: Reports;
  readonly requests: Requests;
  readonly containers: Containers;
  readonly containerList: ContainerList;
  readonly logs: Logs;
  readonly nodes: Nodes;
  readonly instances: Instances;
  readonly settings: Settings;
  readonly costs: Costs;
  readonly dashboard: Dashboard;
  readonly usage: UsageQueries;
  /** berth pause / resume (pause.ts). */
  readonly pauses: Pauses;
  /** Containers' own checkpoints, carried between attempts (checkpoints.ts). */
  readonly checkpoints: Checkpoints;

  constructor(pool: Db, opts: { clock?: Clock; rng?: Rng } = {}) {
    this.ctx = {
      pool,
      clock: opts.clock ?? systemClock,
      rng: opts.rng ?? Math.random,
      wake: new Wake(pool),
    };
    this.tokens = new Tokens(this.ctx);
    this.transitions = new Transitions(this.ctx);
    this.reports = new Reports(this.ctx, this.transitions);
    this.requests = new Requests(this.ctx, this.transitions);
    this.containers = new Containers(this.ctx, this.transitions);
    this.containerList = new ContainerList(this.ctx);
    this.logs = new Logs(this.ctx);
    this.nodes = new Nodes(this.ctx, this.tokens, this.transitions);
    this.settings = new Settings(this.ctx);
    this.costs = new Costs(this.ctx);
    this.dashboard = new Dashboard(this.ctx);
    this.usage = new UsageQueries(this.ctx);
    this.checkpoints = new Checkpoints(this.ctx, this.transitions);
    this.pauses = new Pauses(this.ctx);
    this.instances = new Instances(this.ctx, this.pauses);
  }
}
