// `berth dispatch --config FILE`: the dispatcher for one cluster, against the database (DESIGN §6).
import type { Command } from 'commander';
import { loadConfig } from '../../config/options.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { processLogger } from '../../log/logger.js';
import { untilSignal } from './server.js';

interface DispatchFlags {
  config?: string;
  databaseUrl?: string;
  apiUrl?: string;
  logLevel?: string;
}

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
    .option('--log-level <level>', 'log level (default warn; info logs every action)')
    .action(async (opts: DispatchFlags, cmd: Command) => {
      const g = cmd.optsWithGlobals() as { home?: string };
      const cfg = loadConfig({
        home: g.home,
        database_url: opts.databaseUrl,
        api_url: opts.apiUrl,
        log_level: opts.logLevel,
      });
      const dcfg = loadDispatchConfig(opts.config ?? null);
      const logger = processLogger('berth dispatch', cfg.log_level, { config: cfg, dispatch: dcfg });
      const { runDispatchService } = await import('../../dispatch/service.js');
      const say = (line: string) => console.error(`berth dispatch: ${line}`);
      const service = await runDispatchService(cfg, dcfg, logger);
      say(
        `dispatcher ${dcfg.cluster}/${dcfg.tag} running (${dcfg.instanceTypes.length} instance types, driver ${dcfg.driver})`,
      );
      const sig = await Promise.race([untilSignal(), service.done.then(() => null)]);
      if (sig) say(`${sig}: finishing the pass in flight and releasing the lease`);
      await service.stop();
      return undefined;
    });
}
