// `berth dispatch --config FILE`: the dispatcher for one cluster, against the database (DESIGN §6).
import type { Command } from 'commander';
import { configFor, withOptionFlags } from '../flags.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { processLogger } from '../../log/logger.js';
import type { Config } from '../../config/options.js';
import { Shutdown } from '../../server/shutdown.js';
import { watchStopSignals } from '../stop-signals.js';

/** A running dispatcher of either backend, and the line saying what it is. */
interface Started {
  done: Promise<void>;
  stop(): Promise<void>;
  running: string;
}

async function startCloud(cfg: Config): Promise<() => Promise<Started>> {
  const dcfg = loadDispatchConfig(cfg.dispatch_config);
  const logger = processLogger('berth dispatch', cfg.log_level, { config: cfg, dispatch: dcfg });
  const { runDispatchService } = await import('../../dispatch/service.js');
  return async () => ({
    ...(await runDispatchService(cfg, dcfg, logger)),
    running: `dispatcher ${dcfg.cluster}/${dcfg.tag} running (${dcfg.instanceTypes.length} instance types, driver ${dcfg.driver})`,
  });
}

// Backend hook (slurm: src/backends/slurm/, its own config keys): --backend or the file's "backend".
async function startSlurm(cfg: Config): Promise<() => Promise<Started>> {
  const { loadSlurmConfig } = await import('../../backends/slurm/config.js');
  const scfg = loadSlurmConfig(cfg.dispatch_config, { backend: 'slurm' });
  const logger = processLogger('berth dispatch', cfg.log_level, { config: cfg, dispatch: scfg });
  const { runSlurmService } = await import('../../backends/slurm/service.js');
  return async () => ({
    ...(await runSlurmService(cfg, scfg, logger)),
    running: `slurm dispatcher ${scfg.cluster}/${scfg.tag} running`,
  });
}

export function registerDispatch(program: Command): void {
  withOptionFlags(program.command('dispatch'), 'dispatch')
    .description(
      'run the dispatcher: turn the queue into instances, or into jobs on a SLURM cluster (see ' +
        'docs/CONFIG.md and docs/SLURM.md for the config file; the global --api-url is the URL agents are given)',
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFor(cmd);
      const { configuredBackend } = await import('../../backends/slurm/config.js');
      const backend = cfg.backend ?? configuredBackend(cfg.dispatch_config);
      const start = backend === 'slurm' ? await startSlurm(cfg) : await startCloud(cfg);
      const say = (line: string) => console.error(`berth dispatch: ${line}`);
      // Its instances and jobs outlive it (adopted by the next dispatcher): a forced stop just exits.
      const stop = watchStopSignals({ say, shutdown: new Shutdown(), force: () => {} });
      try {
        const service = await start();
        say(service.running);
        const sig = await Promise.race([stop.requested, service.done.then(() => null)]);
        if (sig) say(`${sig}: finishing the pass in flight and releasing the lease`);
        await service.stop();
      } finally {
        stop.dispose();
      }
      return undefined;
    });
}
