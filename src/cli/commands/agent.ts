// `berth agent`: the process on an instance that runs the containers assigned to its node (DESIGN §5).
import type { Command } from 'commander';
import { parseSize } from '../../model/units.js';
import { NETWORK_SETTINGS, SANDBOX_SETTINGS } from '../../agent/runtimes/sandbox.js';
import { errorFields, processLogger } from '../../log/logger.js';
import { required } from '../../config/options.js';
import { UsageError } from '../errors.js';
import { configFor, withOptionFlags } from '../flags.js';

interface SandboxFlags {
  processSandbox: string;
  containerNetwork: string;
  logLimit: string;
}

/** A flag whose value must be one of `allowed`. */
function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value))
    throw new UsageError(`${flag}: expected ${allowed.join(' or ')}, got ${JSON.stringify(value)}`);
  return value as T;
}

export function registerAgent(program: Command): void {
  withOptionFlags(program.command('agent'), 'agent')
    .description(
      "run a node's agent: register, ping for work, run containers under hard limits, report " +
        '(with the global --api-url URL, or $BERTH_API_URL)',
    )
    .option(
      '--process-sandbox <kind>',
      'isolation of image-less containers: bwrap (bubblewrap: own namespaces and uid, read-only system) or ' +
        "none (UNSAFE: a plain host process that can read Berth's tokens) ($BERTH_PROCESS_SANDBOX)",
      process.env.BERTH_PROCESS_SANDBOX || 'bwrap',
    )
    .option(
      '--log-limit <size>',
      'stdout+stderr stored per container: the first half, then the last quarter of each stream; 0 = no limit ' +
        '($BERTH_LOG_LIMIT)',
      process.env.BERTH_LOG_LIMIT || '64MiB',
    )
    .option(
      '--container-network <kind>',
      "containers' network on every runtime: none (loopback only) or host ($BERTH_CONTAINER_NETWORK)",
      process.env.BERTH_CONTAINER_NETWORK || 'none',
    )
    .action(async (opts: SandboxFlags, cmd: Command) => {
      const cfg = configFor(cmd);
      const [apiUrl, nodeId, workDir] = [
        required(cfg, 'api_url'),
        required(cfg, 'node_id'),
        required(cfg, 'work_dir'),
      ];
      const processSandbox = oneOf('--process-sandbox', opts.processSandbox, SANDBOX_SETTINGS);
      const containerNetwork = oneOf('--container-network', opts.containerNetwork, NETWORK_SETTINGS);
      let logLimitBytes: number;
      try {
        logLimitBytes = parseSize(opts.logLimit);
      } catch (err) {
        throw new UsageError(`--log-limit: ${(err as Error).message}`);
      }
      if (logLimitBytes !== 0 && logLimitBytes < 64 * 1024)
        throw new UsageError(
          `--log-limit: expected 0 (no limit) or at least 64KiB, got ${JSON.stringify(opts.logLimit)}`,
        );
      const logger = processLogger('berth agent', cfg.log_level, { config: cfg });
      // Loaded on use: other commands do not need the runtimes.
      const { Agent, AgentFatalError } = await import('../../agent/agent.js');
      const agent = new Agent({
        apiUrl,
        nodeId,
        bootstrapSecretFile: cfg.bootstrap_secret_file,
        workDir,
        runtime: cfg.runtime as never,
        killGraceMs: cfg.kill_grace,
        pingWaitMs: cfg.ping_wait,
        logger,
        processSandbox,
        containerNetwork,
        logLimitBytes,
      });
      const onSignal = (sig: NodeJS.Signals) => {
        logger.warn({ signal: sig }, `${sig}: stopping (containers keep running for the next agent)`);
        agent.stop();
      };
      // Never crash on a stray rejection (a daemon): log it and carry on.
      process.on('unhandledRejection', (err) => logger.error({ err }, 'unexpected rejection'));
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      let code = 0;
      try {
        await agent.run();
      } catch (err) {
        if (err instanceof AgentFatalError) {
          logger.fatal(errorFields(err), err.message);
          code = err.exitCode;
        } else if ((err as Error).name === 'AbortedError') {
          code = 0; // stopped while registering
        } else {
          logger.fatal({ err }, 'the agent failed');
          code = 1;
        }
      }
      // Supervisors of containers left running keep timers; the agent is done with them.
      process.exit(code);
    });
}
