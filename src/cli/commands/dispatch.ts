// `berth dispatch --config FILE`: the dispatcher for one cluster, against the database (DESIGN §6).
import type { Command } from 'commander';
import { loadConfig } from '../../config/options.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { UsageError } from '../errors.js';
import { untilSignal } from './server.js';

const BACKENDS = ['cloud', 'slurm'];

export function registerDispatch(program: Command): void {
  program
    .command('dispatch')
    .description('run the dispatcher: turn the queue into instances (see docs/CONFIG.md for the config file)')
    .option(
      '--config <file>',
      'dispatch config (JSON): cluster, tag, driver, instance_types, scheduler, timers',
    )
    .option(
      '--database-url <url>',
      'PostgreSQL URL (default $BERTH_DATABASE_URL, else the local embedded server)',
    )
    .option('--api-url <url>', 'API URL the agents use (default the local server)')
    .option(
      '--backend <name>',
      'cloud (instances through a driver) or slurm (an existing SLURM cluster, docs/SLURM.md); default the config\'s "backend", else cloud',
    )
    .action(
      async (
        opts: { config?: string; databaseUrl?: string; apiUrl?: string; backend?: string },
        cmd: Command,
      ) => {
        const g = cmd.optsWithGlobals() as { home?: string };
        const cfg = loadConfig({ home: g.home, database_url: opts.databaseUrl, api_url: opts.apiUrl });
        const say = (line: string) => console.error(`berth dispatch: ${line}`);
        if (opts.backend !== undefined && !BACKENDS.includes(opts.backend))
          throw new UsageError(
            `--backend: expected one of ${BACKENDS.join(', ')}, got ${JSON.stringify(opts.backend)}`,
          );
        // Backend hook (slurm: src/backends/slurm/, its own config keys): --backend or the file's "backend".
        const { configuredBackend, loadSlurmConfig } = await import('../../backends/slurm/config.js');
        if ((opts.backend ?? configuredBackend(opts.config ?? null)) === 'slurm') {
          const scfg = loadSlurmConfig(opts.config ?? null, { backend: 'slurm' });
          const { runSlurmService } = await import('../../backends/slurm/service.js');
          const service = await runSlurmService(cfg, scfg, say);
          const sig = await Promise.race([untilSignal(), service.done.then(() => null)]);
          if (sig) say(`${sig}: finishing the pass in flight and releasing the lease`);
          await service.stop();
          return undefined;
        }
        const dcfg = loadDispatchConfig(opts.config ?? null);
        const { runDispatchService } = await import('../../dispatch/service.js');
        const service = await runDispatchService(cfg, dcfg, say);
        const sig = await Promise.race([untilSignal(), service.done.then(() => null)]);
        if (sig) say(`${sig}: finishing the pass in flight and releasing the lease`);
        await service.stop();
        return undefined;
      },
    );
}
