// `berth dispatch --config FILE`: the dispatcher for one cluster, against the database (DESIGN §6).
import type { Command } from 'commander';
import { configFor, withOptionFlags } from '../flags.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { processLogger } from '../../log/logger.js';
import { Shutdown } from '../../server/shutdown.js';
import { watchStopSignals } from '../stop-signals.js';

export function registerDispatch(program: Command): void {
  withOptionFlags(program.command('dispatch'), 'dispatch')
    .description(
      'run the dispatcher: turn the queue into instances (see docs/CONFIG.md for the config file; the ' +
        'global --api-url is the URL agents are given)',
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFor(cmd);
      const dcfg = loadDispatchConfig(cfg.dispatch_config);
      const logger = processLogger('berth dispatch', cfg.log_level, { config: cfg, dispatch: dcfg });
      const { runDispatchService } = await import('../../dispatch/service.js');
      const say = (line: string) => console.error(`berth dispatch: ${line}`);
      // Its instances are machines of their own (adopted by the next dispatcher): a forced stop just exits.
      const stop = watchStopSignals({ say, shutdown: new Shutdown(), force: () => {} });
      try {
        const service = await runDispatchService(cfg, dcfg, logger);
        say(
          `dispatcher ${dcfg.cluster}/${dcfg.tag} running (${dcfg.instanceTypes.length} instance types, driver ${dcfg.driver})`,
        );
        const sig = await Promise.race([stop.requested, service.done.then(() => null)]);
        if (sig) say(`${sig}: finishing the pass in flight and releasing the lease`);
        await service.stop();
      } finally {
        stop.dispose();
      }
      return undefined;
    });
}
