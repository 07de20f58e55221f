// `berth up`: everything on this machine in one process: embedded PostgreSQL, the API server, and a
// dispatcher whose instances are local `berth agent` processes. `--demo` runs a small workload to the end.
import type { Command } from 'commander';
import type { Registry } from 'prom-client';
import { configFor, withOptionFlags } from '../flags.js';
import { loadDispatchConfig } from '../../dispatch/config.js';
import { processLogger, type Logger } from '../../log/logger.js';
import type { DispatchConfig } from '../../dispatch/config.js';
import type { RunningDispatcher } from '../../dispatch/run.js';
import type { DriverOptions } from '../../dispatch/service.js';
import { formatSize } from '../../model/units.js';
import { PROCESS_OPTIONS, type Config } from '../../config/options.js';
import type { Store } from '../../store/store.js';
import { lockHome } from '../../server/home-lock.js';
import { Shutdown } from '../../server/shutdown.js';
import { watchStopSignals } from '../stop-signals.js';
import { destroyAll, forceStop } from '../up-stop.js';
import { UsageError } from '../errors.js';
import { startEmulatedCloud, stopEmulatedCloud, type EmulatedCloud } from '../up-ec2-emulated.js';

/** What `berth up`'s agents will do with containers that have no image, when it is not the safe default. */
async function processSandboxNote(cfg: Config): Promise<string | null> {
  if (cfg.process_sandbox === 'none')
    return "WARNING: process sandbox none: containers without an image run unsandboxed and can read Berth's tokens";
  const { probeSandbox } = await import('../../agent/runtimes/sandbox.js');
  const tools = await probeSandbox(cfg.bwrap);
  return typeof tools === 'string'
    ? `containers without an image will be refused: ${tools} (or --process-sandbox none where every user is trusted: unsafe)`
    : null;
}

/**
 * The quick start runs on a machine with Node.js alone. Where bubblewrap cannot run, `berth up --demo` runs
 * the demo's own containers (submitted by berth up itself; no user token exists, and it stops when the demo
 * is done) as plain processes, and says so. Without --demo, image-less containers stay refused (issue 10).
 * Returns the config to use and what to say, if anything.
 */
export async function demoSandbox(cfg: Config, demo: boolean): Promise<{ cfg: Config; note: string | null }> {
  if (!demo || cfg.process_sandbox !== 'bwrap') return { cfg, note: null };
  const { probeSandbox } = await import('../../agent/runtimes/sandbox.js');
  const tools = await probeSandbox(cfg.bwrap);
  if (typeof tools !== 'string') return { cfg, note: null };
  return {
    cfg: { ...cfg, process_sandbox: 'none' },
    note:
      `${tools}: the demo's own containers run as plain processes. Install bubblewrap before anyone ` +
      'else submits work here (docs/SECURITY.md): without --demo such containers are refused.',
  };
}

/** The options `berth up` reads for its agents, passed on as their flags (src/config/options.ts). */
const AGENT_KEYS = ['process_sandbox', 'bwrap'] as const;
const agentArgs = (cfg: Config): string[] =>
  AGENT_KEYS.flatMap((k) => [PROCESS_OPTIONS.option(k).flag!, String(cfg[k])]);

export function registerUp(program: Command): void {
  withOptionFlags(program.command('up'), 'up')
    .description(
      'run Berth on this machine: database, API server, dispatcher, local instances (or an emulated EC2: --cloud)',
    )
    .option('--demo', 'submit a small demo workload, show its progress, and stop when it is done')
    .action(async (opts: { demo?: boolean }, cmd: Command) => {
      const demoSafe = await demoSandbox(configFor(cmd), !!opts.demo);
      const cfg = demoSafe.cfg;
      const emulatedCloud = cfg.cloud === 'ec2-emulated';
      if (emulatedCloud && cfg.dispatch_config)
        throw new UsageError(
          '--cloud ec2-emulated brings its own dispatch config: leave out --config ($BERTH_DISPATCH_CONFIG)',
        );
      // The demo wants to show instances going away when idle, so it shortens the idle timeout.
      const demoTimers =
        opts.demo && !cfg.dispatch_config
          ? { scheduler: { idle_timeout: '5s' }, boot_delay: '1s', sync_interval: '2s' }
          : {};
      // Read first, so that a bad file stops nothing (the emulated cloud's is made once it runs).
      const localDcfg = emulatedCloud ? null : loadDispatchConfig(cfg.dispatch_config, demoTimers);
      const say = (line: string) => console.error(`berth up: ${line}`);
      if (demoSafe.note) say(demoSafe.note);
      // Listening from the start: a Ctrl-C while starting up stops what has started (a second one, at once).
      const shutdown = new Shutdown();
      let emulated: EmulatedCloud | null = null;
      const stop = watchStopSignals({
        say,
        shutdown,
        force: () => Promise.all([forceStop(shutdown, cfg.home), emulated?.emulator.stop()]),
      });
      let code: number;
      try {
        let runCfg = cfg;
        let dcfg = localDcfg;
        if (dcfg === null) {
          emulated = await startEmulatedCloud(say, agentArgs(cfg));
          // The booted agents reach the API only at the emulator's host address: keep the port, not the host.
          runCfg = {
            ...cfg,
            listen: `${emulated.listenHost}:${cfg.listen.slice(cfg.listen.lastIndexOf(':') + 1)}`,
          };
          dcfg = loadDispatchConfig(null, { ...demoTimers, ...emulated.dispatch });
        }
        // Warnings and errors (a failed destroy, a lost node, a refused create) reach the same output, on a
        // terminal as lines like the progress lines, else as JSON.
        const logger = processLogger('berth up', cfg.log_level, { config: runCfg, dispatch: dcfg });
        code = await run(runCfg, dcfg, !!opts.demo, say, logger, shutdown, stop.requested, {
          agentArgs: agentArgs(cfg),
          ...(emulated ? { credentials: emulated.credentials } : {}),
        });
      } finally {
        if (emulated) await stopEmulatedCloud(emulated, say);
        stop.dispose();
      }
      (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
    });
}

/**
 * Starts everything, runs until asked to stop (or the demo ends), and stops in order: the dispatcher, the
 * instances (their running containers are retried at the next start), the API, the database last.
 * Returns the exit code.
 */
async function run(
  cfg: Config,
  dcfg: DispatchConfig,
  demo: boolean,
  say: (line: string) => void,
  logger: Logger,
  shutdown: Shutdown,
  requested: Promise<NodeJS.Signals>,
  driverOptions: DriverOptions,
): Promise<number> {
  const lock = await lockHome(cfg.home, 'berth up');
  try {
    const [{ startServer }, { startDispatcher }, { openDriver }] = await Promise.all([
      import('../../server/server.js'),
      import('../../dispatch/run.js'),
      import('../../dispatch/service.js'),
    ]);
    const registries: Registry[] = [];
    const server = await startServer(cfg, { onProgress: say, registries, logger, shutdown, lock });
    let dispatcher: RunningDispatcher | null = null;
    let code = 0;
    try {
      if (!shutdown.begun) {
        const driver = await openDriver(dcfg, cfg.home, driverOptions);
        dispatcher = await startDispatcher({
          cfg: dcfg,
          store: server.store,
          dbUrl: server.db.url,
          notifier: server.notifier,
          driver,
          apiUrl: server.url,
          logger,
          // The instances' lifecycle as progress; lost nodes, refused creates and failures come from the logger.
          onEvent: (e) => {
            if (e.kind === 'instance-created')
              say(`instance ${e.instance} (${e.type}) booting for ${e.for.length} container(s)`);
            else if (e.kind === 'instance-ready') say(`instance ${e.instance} is up`);
            else if (e.kind === 'instance-shutdown') say(`instance ${e.instance} shutting down: ${e.reason}`);
          },
        });
        registries.push(dispatcher.registry);
      }
      if (dispatcher && !shutdown.begun)
        code = await serve({
          url: server.url,
          store: server.store,
          home: cfg.home,
          dispatcher,
          dcfg,
          demo,
          say,
          requested,
          sandboxNote: await processSandboxNote(cfg),
        });
      else say(`${await requested}: stopping`);
    } finally {
      // Each step even when one before it failed (the database may be down): nothing may stay running.
      shutdown.begin();
      const step = async (what: string, f: () => Promise<void>) =>
        f().catch((err: Error) => say(`${what}: ${err.message}`));
      if (dispatcher) {
        const d = dispatcher;
        await step('stopping the dispatcher', () => d.stop());
        await step('shutting the instances down', () => destroyAll(d.dispatcher, server.store, say));
      }
      await step('stopping the API server and the database', () => server.stop());
    }
    return code;
  } finally {
    lock.release();
  }
}

/** Runs until a stop is requested (or the dispatcher ends, or the demo is done); returns the exit code. */
async function serve(o: {
  url: string;
  store: Store;
  home: string;
  dispatcher: RunningDispatcher;
  dcfg: DispatchConfig;
  demo: boolean;
  say: (line: string) => void;
  requested: Promise<NodeJS.Signals>;
  /** How image-less containers will fare, when not as they should (processSandboxNote). */
  sandboxNote: string | null;
}): Promise<number> {
  const { url, dispatcher, say, requested } = o;
  const { localSigninLink } = await import('../../web/signin-link.js');
  say(`Berth is up: API ${url}, metrics ${url}/metrics`);
  say(`dashboard: ${url}/dashboard`);
  const link = await localSigninLink(o.store, o.home).catch(() => null);
  if (link)
    say(
      `sign in to the dashboard: ${url}${link} (works once, within 10 minutes; later: npx berth dashboard)`,
    );
  if (o.sandboxNote) say(o.sandboxNote);
  say(
    `instance types: ${o.dcfg.instanceTypes.map((t) => `${t.name} (${t.vcpus} CPUs, ${formatSize(t.ram)})`).join(', ')}`,
  );
  say(`submit work with: npx berth submit --cpus 1 --ram 512MiB -- echo hello   (Ctrl-C stops everything)`);
  if (o.demo) {
    const { runDemo } = await import('../up-demo.js');
    let interrupted = false;
    const run = runDemo(o.store, dispatcher.dispatcher, say, () => interrupted);
    const outcome = await Promise.race([run, requested.then(() => 'interrupted' as const)]);
    interrupted = true;
    await run.catch(() => {}); // its loop sees the flag and returns before the database closes
    if (outcome === 'interrupted') say('interrupted: stopping (start `berth up --demo` again to resume)');
    return outcome === 'ok' ? 0 : outcome === 'interrupted' ? 130 : 1;
  }
  const sig = await Promise.race([requested, dispatcher.done.then(() => null)]);
  say(`${sig ?? 'dispatcher stopped'}: stopping`);
  return 0;
}
