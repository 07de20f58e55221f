// `berth server`: the API server, with its own PostgreSQL unless a database URL is configured.
import type { Command } from 'commander';
import { processLogger } from '../../log/logger.js';
import { Shutdown } from '../../server/shutdown.js';
import { configFor, withOptionFlags } from '../flags.js';
import { watchStopSignals } from '../stop-signals.js';

export function registerServer(program: Command): void {
  withOptionFlags(program.command('server'), 'server')
    .description('run the API server (starts an embedded PostgreSQL when no database URL is set)')
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFor(cmd);
      const say = (line: string) => console.error(`berth server: ${line}`);
      const logger = processLogger('berth server', cfg.log_level, { config: cfg });
      // Listening from the start: a Ctrl-C while starting up stops what has started (a second one, at once:
      // the embedded PostgreSQL, in a process group of its own, is killed with the process).
      const shutdown = new Shutdown();
      const stop = watchStopSignals({ say, shutdown, force: () => shutdown.killOwned() });
      try {
        // Loaded on use: the server pulls in fastify and the database layer, which other commands do not need.
        const { startServer } = await import('../../server/server.js');
        const server = await startServer(cfg, { onProgress: say, logger, shutdown });
        if (!shutdown.begun) {
          say(`listening on ${server.url}`);
          say(
            `dashboard: ${server.url}/dashboard (sign in with an API token, or a link from \`berth dashboard\`)`,
          );
          if (server.createdAdminToken)
            say(`the local CLI uses the admin token in ${cfg.home}; try: berth submit -- echo hello`);
        }
        say(`${await stop.requested}: stopping`);
        await server.stop(); // the API, then the database
      } finally {
        stop.dispose();
      }
    });
}
