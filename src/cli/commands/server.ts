// `berth server`: the API server, with its own PostgreSQL unless a database URL is configured.
import type { Command } from 'commander';
import { loadConfig } from '../../config/options.js';
import { processLogger } from '../../log/logger.js';

/** Resolves when the process is asked to stop (SIGINT or SIGTERM). */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(sig);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

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
      const logger = processLogger('berth server', cfg.log_level, { config: cfg });
      // Loaded on use: the server pulls in fastify and the database layer, which other commands do not need.
      const { startServer } = await import('../../server/server.js');
      const server = await startServer(cfg, { onProgress: say, logger });
      say(`listening on ${server.url}`);
      if (server.createdAdminToken)
        say(`the local CLI uses the admin token in ${cfg.home}; try: berth submit -- echo hello`);
      const sig = await untilSignal();
      say(`${sig}: stopping`);
      await server.stop();
    });
}
