// `npm run chaos -- [--driver virtual|ec2-emulated] --containers N --seed S [--json]`: the chaos run from
// the command line: on virtual time with the sim cloud (the default, run.ts), or in real time on the
// emulated EC2 (ec2-emulated.ts). Prints the checks and figures; exits non-zero when a check fails.
import { runEc2Chaos } from './ec2-emulated.js';
import { runChaos, type ChaosResult } from './run.js';

const DRIVERS = ['virtual', 'ec2-emulated'];
const di = process.argv.indexOf('--driver');
const driver = di < 0 ? 'virtual' : process.argv[di + 1];
if (driver === undefined || !DRIVERS.includes(driver)) {
  process.stderr.write(`--driver: expected one of ${DRIVERS.join(', ')}, got ${driver ?? 'nothing'}\n`);
  process.exit(2);
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v <= 0) {
    process.stderr.write(`--${name}: expected a whole number > 0, got ${process.argv[i + 1] ?? 'nothing'}\n`);
    process.exit(2);
  }
  return v;
}

function print(r: ChaosResult): void {
  const out: string[] = [
    `chaos (${driver}): ${r.options.containers} containers, seed ${r.options.seed}`,
    '',
    'checks:',
  ];
  for (const c of r.checks) out.push(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}`, `       ${c.detail}`);
  out.push('', 'failures injected:');
  for (const [k, v] of Object.entries(r.injected)) out.push(`  ${k}: ${v}`);
  out.push('', 'control-plane faults:');
  for (const f of r.faults) out.push(`  ${f}`);
  out.push('', 'figures:');
  for (const [k, v] of Object.entries(r.figures)) out.push(`  ${k}: ${v}`);
  out.push('', r.ok ? 'all checks passed' : 'SOME CHECKS FAILED');
  process.stdout.write(`${out.join('\n')}\n`);
}

// Ctrl-C ends the run cleanly: its servers, agents, emulator and files are stopped and removed.
const abort = new AbortController();
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => abort.abort());
const log = (line: string) => process.stderr.write(`${line}\n`);
const result =
  driver === 'ec2-emulated'
    ? await runEc2Chaos({
        signal: abort.signal,
        containers: arg('containers', 30),
        seed: arg('seed', 1),
        wallLimitMs: arg('wall-limit-s', 10 * 60) * 1000,
        log,
      })
    : await runChaos({
        signal: abort.signal,
        containers: arg('containers', 500),
        seed: arg('seed', 1),
        wallLimitMs: arg('wall-limit-s', 20 * 60) * 1000,
        log,
      });
if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
else print(result);
process.exit(result.ok ? 0 : 1);
