// `npm run bench -- NAME [args]`: runs bench/NAME.ts. Each benchmark module exports `run(args)`; a bench's
// options are read by bench/args.ts (`npm run bench -- NAME --help` prints them).
import { ConfigError } from '../src/config/declare.js';
import { CatalogError } from '../src/sim/catalog.js';
import { WorkloadError } from '../src/sim/workload/types.js';
import { UsageError } from './args.js';

const BENCHES = [
  'queue',
  'peer',
  'scheduler',
  'latency',
  'runtime',
  'vs-slurm',
  'slurm-agent',
  'log-shipping',
  'dashboard',
  'ec2',
  'pressure',
  'dispatch-creates',
  'e2e',
  'opportunistic',
  'snapshot-read',
  'checkpoint',
  'slurm-move',
  'node-guard',
  'sim-gap',
  'wf-collection',
  'status-writes',
] as const;

async function main(): Promise<number> {
  const [name, ...args] = process.argv.slice(2);
  if (!name || !(BENCHES as readonly string[]).includes(name)) {
    console.error(`usage: npm run bench -- NAME [options]\nNAME is one of: ${BENCHES.join(', ')}`);
    return 2;
  }
  let mod: { run(args: string[]): Promise<number | void> };
  try {
    mod = (await import(`./${name}.js`)) as typeof mod;
  } catch (err) {
    console.error(`bench ${name} is not available: ${(err as Error).message}`);
    return 2;
  }
  return (await mod.run(args)) ?? 0;
}

main().then(
  (code) => (process.exitCode = code),
  (err) => {
    if (err instanceof UsageError) {
      (err.exitCode === 0 ? console.log : console.error)(err.message);
      process.exitCode = err.exitCode;
      return;
    }
    // A workload, configuration or catalog a bench was given that does not read: what is wrong with it
    // (the message names the file and the field), not a stack trace.
    if (err instanceof WorkloadError || err instanceof ConfigError || err instanceof CatalogError) {
      console.error(`bench: ${err.message}`);
      process.exitCode = 2;
      return;
    }
    console.error(err);
    process.exitCode = 1;
  },
);
