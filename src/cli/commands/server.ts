// `berth server`: the API server, with its own PostgreSQL unless a database URL is configured.
import type { Command } from 'commander';
import { processLogger } from '../../log/logger.js';
import { configFor, withOptionFlags } from '../flags.js';

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
  withOptionFlags(program.command('server'), 'server')
    .description('run the API server (starts an embedded PostgreSQL when no database URL is set)')
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFor(cmd);
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
