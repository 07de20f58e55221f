// `berth server`: the API server, with its own PostgreSQL unless a database URL is configured.
import type { Command } from 'commander';
import { loadConfig } from '../../config/options.js';
import { Shutdown } from '../../server/shutdown.js';
import { watchStopSignals } from '../stop-signals.js';

export function registerServer(program: Command): void {
  program
    .command('server')
    .description('run the API server (starts an embedded PostgreSQL when no database URL is set)')
    .option('--listen <host:port>', 'address to listen on (default 127.0.0.1:8470)')
    .option('--database-url <url>', 'PostgreSQL URL (default $BERTH_DATABASE_URL, else embedded)')
    .option('--log-level <level>', 'log level (default warn)')
    .action(async (opts: { listen?: string; databaseUrl?: string; logLevel?: string }, cmd: Command) => {
      const g = cmd.optsWithGlobals() as { home?: string };
      const cfg = loadConfig({
        home: g.home,
        listen: opts.listen,
        database_url: opts.databaseUrl,
        log_level: opts.logLevel,
      });
      const say = (line: string) => console.error(`berth server: ${line}`);
      // Listening from the start: a Ctrl-C while starting up stops what has started (a second one, at once:
      // the embedded PostgreSQL, in a process group of its own, is killed with the process).
      const shutdown = new Shutdown();
      const stop = watchStopSignals({ say, shutdown, force: () => shutdown.killOwned() });
      try {
        // Loaded on use: the server pulls in fastify and the database layer, which other commands do not need.
        const { startServer } = await import('../../server/server.js');
        const server = await startServer(cfg, { onProgress: say, shutdown });
        if (!shutdown.begun) {
          say(`listening on ${server.url}`);
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
