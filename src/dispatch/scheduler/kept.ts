// What a planner keeps from one pass to the next (issue 12) to compute the same pass faster: the pool
// view's orders (pool.ts PoolOrder) and the shapes of the containers. A pass from scratch (plan(snapshot)
// alone, `berth plan`) builds them anew and decides the same; the incremental planner (incremental.ts)
// keeps one for the dispatcher's passes.
import type { InstanceType } from '../../model/types.js';
import type { ShapeCache } from './fitting.js';
import { type ShapeConfig } from './fitting.js';
import { PoolOrder } from './pool.js';

const SHAPE_FIELDS = [
  'ramOverhead',
  'maxPriceFactor',
  'maxSpendPerHour',
  'onDemandAfterInterruptions',
  'shareRule',
] as const satisfies readonly (keyof ShapeConfig)[];

/** A cache kept over a long run starts again past this many shapes (each lookup scans its ram's shapes). */
const MAX_SHAPES = 10_000;

export class KeptPass {
  readonly order = new PoolOrder();
  private shapeCache: { types: readonly InstanceType[]; config: ShapeConfig; cache: ShapeCache } | null =
    null;

  /**
   * The shape cache of the last pass while the snapshot's type list (the same array, whose types are never
   * changed in place) and what shapes depend on in the config are the same, and it is not too big; else
   * `make()`'s.
   */
  shapes(types: readonly InstanceType[], config: ShapeConfig, make: () => ShapeCache): ShapeCache {
    const k = this.shapeCache;
    if (
      k !== null &&
      k.types === types &&
      k.cache.size <= MAX_SHAPES &&
      SHAPE_FIELDS.every((f) => k.config[f] === config[f])
    )
      return k.cache;
    const cache = make();
    this.shapeCache = { types, config, cache };
    return cache;
  }
}
