// `berth dispatch --config FILE`: the dispatcher for one cluster, against the database (DESIGN §6).
import type { Command } from 'commander';
import { loadConfig } from '../../config/options.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { Shutdown } from '../../server/shutdown.js';
import { watchStopSignals } from '../stop-signals.js';

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
    .action(async (opts: { config?: string; databaseUrl?: string; apiUrl?: string }, cmd: Command) => {
      const g = cmd.optsWithGlobals() as { home?: string };
      const cfg = loadConfig({ home: g.home, database_url: opts.databaseUrl, api_url: opts.apiUrl });
      const dcfg = loadDispatchConfig(opts.config ?? null);
      const { runDispatchService } = await import('../../dispatch/service.js');
      const say = (line: string) => console.error(`berth dispatch: ${line}`);
      // Its instances are machines of their own (adopted by the next dispatcher): a forced stop just exits.
      const stop = watchStopSignals({ say, shutdown: new Shutdown(), force: () => {} });
      try {
        const service = await runDispatchService(cfg, dcfg, say);
        const sig = await Promise.race([stop.requested, service.done.then(() => null)]);
        if (sig) say(`${sig}: finishing the pass in flight and releasing the lease`);
        await service.stop();
      } finally {
        stop.dispose();
      }
      return undefined;
    });
}
