// `berth sim pack`: what a clairvoyant offline packer pays for a workload (src/sim/pack.ts), against the
// cost lower bound: how much of the gap between a scheduler's cost and the bound any schedule could close.
import { mean } from '../../cloud/sim/distribution.js';
import { resolveOptions } from '../../cloud/sim/options.js';
import { ConfigError } from '../../config/declare.js';
import { parseDuration } from '../../model/units.js';
import { defaultSimConfig, loadSimConfig, type SimConfig } from '../../sim/config.js';
import { pack } from '../../sim/pack.js';
import { PACK_ESTIMATES, packJobs } from '../../sim/pack-input.js';
import { packDecreasing } from '../../sim/pack-decreasing.js';
import { packWaiting } from '../../sim/pack-wait.js';
import { prepareWorkload } from '../../sim/workload/prepare.js';
import { WorkloadError } from '../../sim/workload/types.js';
import { UsageError } from '../errors.js';

export interface PackOpts {
  config?: string;
  lookahead: string;
  estimates: string;
  method: string;
  maxWait: string;
  json?: boolean;
}

const r6 = (x: number): number => Math.round(x * 1e6) / 1e6;

export function packCommand(workload: string, opts: PackOpts): void {
  let lookahead: number;
  try {
    lookahead = parseDuration(opts.lookahead);
  } catch {
    throw new UsageError(
      `--lookahead: expected a duration such as 0s or 5m, got ${JSON.stringify(opts.lookahead)}`,
    );
  }
  const estimates = PACK_ESTIMATES.find((e) => e === opts.estimates);
  if (estimates === undefined)
    throw new UsageError(
      `--estimates: expected one of ${PACK_ESTIMATES.join(', ')}, got ${JSON.stringify(opts.estimates)}`,
    );
  if (opts.method !== 'arrival' && opts.method !== 'decreasing' && opts.method !== 'wait')
    throw new UsageError(
      `--method: expected arrival, decreasing or wait, got ${JSON.stringify(opts.method)}`,
    );
  if (opts.method === 'decreasing' && (estimates !== 'exact' || lookahead > 0))
    throw new UsageError(`--method ${opts.method}: clairvoyant only (--estimates exact, --lookahead 0s)`);
  if (opts.method === 'wait' && lookahead > 0)
    throw new UsageError(`--method wait: no --lookahead (0s only)`);
  let maxWait: number;
  try {
    maxWait = parseDuration(opts.maxWait);
  } catch {
    throw new UsageError(`--max-wait: expected a duration such as 60s, got ${JSON.stringify(opts.maxWait)}`);
  }
  const method = opts.method;
  let config: SimConfig;
  let work;
  try {
    config = opts.config === undefined ? defaultSimConfig() : loadSimConfig(opts.config);
    work = prepareWorkload(workload);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`--config ${err.message}`);
    if (err instanceof WorkloadError) throw new UsageError(`workload ${err.message}`);
    throw err;
  }
  const bootMs = mean(resolveOptions({ ...config.cloud, seed: 0 }).bootTime);
  const input = packJobs(work.jobs, work.workflows, estimates);
  const o = { types: config.catalog, billing: config.billing, bootMs, lookahead };
  const r =
    method === 'arrival'
      ? pack(input, o)
      : method === 'decreasing'
        ? packDecreasing(input, o)
        : packWaiting(input, { ...o, maxWait });
  if (opts.json) {
    const out = {
      ...r,
      cost: r6(r.cost),
      lowerBound: r6(r.lowerBound),
      boot: r6(r.boot),
      idle: r6(r.idle),
      alone: r6(r.alone),
      ratio: r.ratio === null ? null : Math.round(r.ratio * 1e4) / 1e4,
      aloneRatio: r.lowerBound > 0 ? Math.round((r.alone / r.lowerBound) * 1e4) / 1e4 : null,
      bootMs: Math.round(bootMs),
      lookaheadMs: lookahead,
      estimates,
      method,
      ...(method === 'wait' ? { maxWaitMs: maxWait } : {}),
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return;
  }
  const ratio = (x: number) => (r.lowerBound > 0 ? (x / r.lowerBound).toFixed(4) : '-');
  process.stdout.write(
    [
      `offline packer, ${method} order (${method === 'wait' ? `waits up to ${maxWait / 1000}s, p90 ${((r.waitP90 ?? 0) / 1000).toFixed(1)}s` : 'zero waits'}, boot ${(bootMs / 1000).toFixed(1)}s billed, lookahead ${lookahead / 1000}s, ${estimates} run times): ${r.instances} instances${r.unfit > 0 ? `, ${r.unfit} jobs fit no type` : ''}`,
      `cost ${r.cost.toFixed(2)}  lower bound ${r.lowerBound.toFixed(2)}  ratio ${ratio(r.cost)}  (boot ${r.boot.toFixed(2)}, idle ${r.idle.toFixed(2)})`,
      `each job alone on its cheapest type (boot, minimum billed): ${r.alone.toFixed(2)}  ratio ${ratio(r.alone)}`,
    ].join('\n') + '\n',
  );
}
