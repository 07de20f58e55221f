// `berth up`: everything on this machine in one process: embedded PostgreSQL, the API server, and a
// dispatcher whose instances are local `berth agent` processes. `--demo` runs a small workload to the end.
import type { Command } from 'commander';
import type { Registry } from 'prom-client';
import { loadConfig } from '../../config/options.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { formatSize } from '../../model/units.js';
import { UsageError } from '../errors.js';
import { untilSignal } from './server.js';

export function registerUp(program: Command): void {
  program
    .command('up')
    .description('run Berth on this machine: database, API server, dispatcher, local instances')
    .option('--listen <host:port>', 'API address (default 127.0.0.1:8470)')
    .option('--config <file>', 'dispatch config (JSON; default: instance types sized for this machine)')
    .option('--demo', 'submit a small demo workload, show its progress, and stop when it is done')
    .option(
      '--cloud <cloud>',
      'local (instances are processes here) or ec2-emulated (the ec2 driver against an EC2 emulated here: moto, booted instances)',
      'local',
    )
    .action(
      async (opts: { listen?: string; config?: string; demo?: boolean; cloud: string }, cmd: Command) => {
        const g = cmd.optsWithGlobals() as { home?: string };
        if (opts.cloud !== 'local' && opts.cloud !== 'ec2-emulated')
          throw new UsageError(`--cloud: expected local or ec2-emulated, got ${JSON.stringify(opts.cloud)}`);
        if (opts.cloud === 'ec2-emulated' && opts.config)
          throw new UsageError('--cloud ec2-emulated brings its own dispatch config: leave out --config');
        const say = (line: string) => console.error(`berth up: ${line}`);
        let cfg = loadConfig({ home: g.home, listen: opts.listen });
        const emulated =
          opts.cloud === 'ec2-emulated'
            ? await (await import('../up-ec2-emulated.js')).startEmulatedCloud(say)
            : null;
        // The booted agents reach the API only at the emulator's host address: keep the port, not the host.
        if (emulated)
          cfg = {
            ...cfg,
            listen: `${emulated.listenHost}:${cfg.listen.slice(cfg.listen.lastIndexOf(':') + 1)}`,
          };
        // The demo wants to show instances going away when idle, so it shortens the idle timeout.
        const demoTimers =
          opts.demo && !opts.config
            ? { scheduler: { idle_timeout: '5s' }, boot_delay: '1s', sync_interval: '2s' }
            : {};
        let dcfg;
        try {
          dcfg = loadDispatchConfig(opts.config ?? null, { ...demoTimers, ...(emulated?.dispatch ?? {}) });
        } catch (err) {
          await emulated?.emulator.stop();
          throw err;
        }
        const [{ startServer }, { startDispatcher }, { openDriver }] = await Promise.all([
          import('../../server/server.js'),
          import('../../dispatch/run.js'),
          import('../../dispatch/service.js'),
        ]);
        const registries: Registry[] = [];
        let server;
        try {
          server = await startServer(cfg, { onProgress: say, registries });
        } catch (err) {
          await emulated?.emulator.stop();
          throw err;
        }
        let dispatcher;
        try {
          const driver = await openDriver(dcfg, cfg.home, emulated?.credentials);
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
              else if (e.kind === 'instance-shutdown')
                say(`instance ${e.instance} shutting down: ${e.reason}`);
              else if (e.kind === 'node-lost') say(`node ${e.node} lost: ${e.reason}`);
              else if (e.kind === 'create-failed') say(`could not create a ${e.type} instance: ${e.message}`);
            },
          });
          registries.push(dispatcher.registry);
        } catch (err) {
          await server.stop();
          await emulated?.emulator.stop();
          throw err;
        }
        say(`Berth is up: API ${server.url}, metrics ${server.url}/metrics`);
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
          if (emulated) {
            const left = await emulated.emulator.liveInstances().catch(() => [] as string[]);
            say(
              left.length === 0
                ? 'the emulated EC2 has no instance left running; stopping it'
                : `the emulated EC2 still lists ${left.length} instance(s) (${left.join(', ')}); terminating them and stopping it`,
            );
            await emulated.emulator.stop();
          }
        };
        if (opts.demo) {
          const { runDemo } = await import('../up-demo.js');
          let interrupted = false;
          const demo = runDemo(server.store, dispatcher.dispatcher, say, () => interrupted);
          const outcome = await Promise.race([demo, untilSignal().then(() => 'interrupted' as const)]);
          interrupted = true;
          await demo.catch(() => {}); // its loop sees the flag and returns before the database closes
          if (outcome === 'interrupted')
            say('interrupted: stopping (start `berth up --demo` again to resume)');
          code = outcome === 'ok' ? 0 : outcome === 'interrupted' ? 130 : 1;
        } else {
          const sig = await Promise.race([untilSignal(), dispatcher.done.then(() => null)]);
          say(`${sig ?? 'dispatcher stopped'}: stopping`);
        }
        await stopAll();
        (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
      },
    );
}
