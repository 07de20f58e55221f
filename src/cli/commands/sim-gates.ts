// `berth sim gates [--file F] [--update]`: runs the scheduling-quality gates (src/sim/gates.ts) and fails
// when cost / lower bound rose more than the tolerance over a recorded figure; --update records the
// measured figures instead (after a deliberate change: see docs/SIMULATOR.md, "Quality gates").
import type { Command } from 'commander';
import { gatesDir, judge, loadGates, measureGate, recordGates, type GateFigures } from '../../sim/gates.js';
import { WorkloadError } from '../../sim/workload/types.js';
import { ConfigError } from '../../config/declare.js';
import { UsageError } from '../errors.js';
import { table } from '../format.js';
import { setExitCode } from '../main.js';

export interface GatesOpts {
  file: string;
  update?: boolean;
}

const fmt = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits));

export async function gatesCommand(opts: GatesOpts, cmd: Command): Promise<void> {
  let file;
  try {
    file = loadGates(opts.file);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
  const dir = gatesDir(opts.file);
  const measured = new Map<string, GateFigures>();
  const rows: string[][] = [];
  let failed = 0;
  for (const g of file.gates) {
    let figures: GateFigures;
    try {
      figures = (await measureGate(g, dir)).figures;
    } catch (err) {
      if (err instanceof WorkloadError || err instanceof ConfigError)
        throw new UsageError(`gate ${g.name}: ${err.message}`);
      throw err;
    }
    measured.set(g.name, figures);
    const v = judge(g.costRatio, figures.costRatio, file.tolerance);
    if (!v.ok && !opts.update) failed++;
    const verdict = opts.update
      ? 'recorded'
      : g.costRatio === null
        ? 'no figure yet'
        : v.ok
          ? v.change! < -file.tolerance
            ? 'better: --update to keep it'
            : 'ok'
          : `REGRESSED (> ${(file.tolerance * 100).toFixed(0)}%)`;
    rows.push([
      g.name,
      fmt(g.costRatio, 4),
      fmt(figures.costRatio, 4),
      v.change === null ? '-' : `${v.change >= 0 ? '+' : ''}${(v.change * 100).toFixed(2)}%`,
      fmt(figures.waitP90, 1),
      fmt(figures.idleShare, 4),
      verdict,
    ]);
  }
  process.stdout.write(
    `${table(['GATE', 'RECORDED COST/LB', 'MEASURED', 'CHANGE', 'WAIT P90 (S)', 'IDLE SHARE', 'VERDICT'], rows)}\n`,
  );
  if (opts.update) {
    recordGates(opts.file, measured);
    process.stdout.write(`recorded the measured figures in ${opts.file}\n`);
  } else if (failed > 0) {
    process.stdout.write(`${failed} gate(s) regressed; if the change is deliberate, run with --update\n`);
    setExitCode(cmd, 1);
  }
}
