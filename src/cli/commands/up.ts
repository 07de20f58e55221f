// `berth up`: everything on this machine in one process: embedded PostgreSQL, the API server, and a
// dispatcher whose instances are local `berth agent` processes. `--demo` runs a small workload to the end.
import type { Command } from 'commander';
import type { Registry } from 'prom-client';
import { loadConfig } from '../../config/options.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { formatSize } from '../../model/units.js';
import { untilSignal } from './server.js';

/** What `berth up`'s agents will do with containers that have no image, when it is not the safe default. */
async function processSandboxNote(): Promise<string | null> {
  if (process.env.BERTH_PROCESS_SANDBOX === 'none')
    return "WARNING: BERTH_PROCESS_SANDBOX=none: containers without an image run unsandboxed and can read Berth's tokens";
  const { probeSandbox } = await import('../../agent/runtimes/sandbox.js');
  const tools = await probeSandbox();
  return typeof tools === 'string'
    ? `containers without an image will be refused: ${tools} (or set BERTH_PROCESS_SANDBOX=none where every user is trusted: unsafe)`
    : null;
}

export function registerUp(program: Command): void {
  program
    .command('up')
    .description('run Berth on this machine: database, API server, dispatcher, local instances')
    .option('--listen <host:port>', 'API address (default 127.0.0.1:8470)')
    .option('--config <file>', 'dispatch config (JSON; default: instance types sized for this machine)')
    .option('--demo', 'submit a small demo workload, show its progress, and stop when it is done')
    .action(async (opts: { listen?: string; config?: string; demo?: boolean }, cmd: Command) => {
      const g = cmd.optsWithGlobals() as { home?: string };
      const cfg = loadConfig({ home: g.home, listen: opts.listen });
      // The demo wants to show instances going away when idle, so it shortens the idle timeout.
      const dcfg = loadDispatchConfig(
        opts.config ?? null,
        opts.demo && !opts.config
          ? { scheduler: { idle_timeout: '5s' }, boot_delay: '1s', sync_interval: '2s' }
          : {},
      );
      const say = (line: string) => console.error(`berth up: ${line}`);
      const [{ startServer }, { startDispatcher }, { openDriver }] = await Promise.all([
        import('../../server/server.js'),
        import('../../dispatch/run.js'),
        import('../../dispatch/service.js'),
      ]);
      const registries: Registry[] = [];
      const server = await startServer(cfg, { onProgress: say, registries });
      let dispatcher;
      try {
        const driver = await openDriver(dcfg, cfg.home);
        dispatcher = await startDispatcher({
          cfg: dcfg,
          store: server.store,
          dbUrl: server.db.url,
          notifier: server.notifier,
          driver,
          apiUrl: server.url,
          log: say,
          onEvent: (e) => {
            if (e.kind === 'instance-created')
              say(`instance ${e.instance} (${e.type}) booting for ${e.for.length} container(s)`);
            else if (e.kind === 'instance-ready') say(`instance ${e.instance} is up`);
            else if (e.kind === 'instance-shutdown') say(`instance ${e.instance} shutting down: ${e.reason}`);
            else if (e.kind === 'node-lost') say(`node ${e.node} lost: ${e.reason}`);
            else if (e.kind === 'create-failed') say(`could not create a ${e.type} instance: ${e.message}`);
          },
        });
        registries.push(dispatcher.registry);
      } catch (err) {
        await server.stop();
        throw err;
      }
      say(`Berth is up: API ${server.url}, metrics ${server.url}/metrics`);
      const sandbox = await processSandboxNote();
      if (sandbox) say(sandbox);
      say(
        `instance types: ${dcfg.instanceTypes.map((t) => `${t.name} (${t.vcpus} CPUs, ${formatSize(t.ram)})`).join(', ')}`,
      );
      say(
        `submit work with: npx berth submit --cpus 1 --ram 512MiB -- echo hello   (Ctrl-C stops everything)`,
      );

      let code = 0;
      const stopAll = async () => {
        await dispatcher.stop();
        const { destroyAll } = await import('../up-stop.js');
        await destroyAll(dispatcher.dispatcher, server.store, say);
        await server.stop();
      };
      if (opts.demo) {
        const { runDemo } = await import('../up-demo.js');
        let interrupted = false;
        const demo = runDemo(server.store, dispatcher.dispatcher, say, () => interrupted);
        const outcome = await Promise.race([demo, untilSignal().then(() => 'interrupted' as const)]);
        interrupted = true;
        await demo.catch(() => {}); // its loop sees the flag and returns before the database closes
        if (outcome === 'interrupted') say('interrupted: stopping (start `berth up --demo` again to resume)');
        code = outcome === 'ok' ? 0 : outcome === 'interrupted' ? 130 : 1;
      } else {
        const sig = await Promise.race([untilSignal(), dispatcher.done.then(() => null)]);
        say(`${sig ?? 'dispatcher stopped'}: stopping`);
      }
      await stopAll();
      (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
    });
}
