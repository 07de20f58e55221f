// `berth agent`: the process on an instance that runs the containers assigned to its node (DESIGN §5).
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { isId } from '../../model/ids.js';
import { parseDuration } from '../../model/units.js';
import { UsageError } from '../errors.js';

interface AgentFlags {
  apiUrl?: string;
  nodeId?: string;
  bootstrapSecretFile?: string;
  workDir?: string;
  runtime: string;
  killGrace: string;
  pingWait: string;
  once?: string;
}

function duration(flag: string, value: string, maxMs = Infinity): number {
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw new UsageError(`${flag}: ${(err as Error).message}`);
  }
  if (ms > maxMs) throw new UsageError(`${flag}: at most ${maxMs / 1000}s, got ${JSON.stringify(value)}`);
  return ms;
}

export function registerAgent(program: Command): void {
  program
    .command('agent')
    .description(
      "run a node's agent: register, ping for work, run containers under hard limits, report " +
        '(with the global --api-url URL, or $BERTH_API_URL)',
    )
    .option('--node-id <id>', 'the node id the dispatcher recorded for this instance')
    .option(
      '--bootstrap-secret-file <file>',
      'file holding the one-time bootstrap secret (needed once; - reads it from stdin)',
    )
    .option(
      '--once <container>',
      'one-shot: run this container only, then exit (a SLURM job; SIGTERM stops it and reports it for a retry)',
    )
    .option('--work-dir <dir>', "the agent's state and the containers' work dirs")
    .option('--runtime <name>', 'auto, docker, podman, runc or process', 'auto')
    .option('--kill-grace <duration>', 'time between SIGTERM and SIGKILL when a container is stopped', '30s')
    .option('--ping-wait <duration>', 'how long one ping waits for work (long poll; at most 60s)', '10s')
    .action(async (opts: AgentFlags, cmd: Command) => {
      const g = cmd.optsWithGlobals() as AgentFlags;
      const apiUrl = g.apiUrl ?? process.env.BERTH_API_URL;
      if (!apiUrl) throw new UsageError('--api-url is required (or set BERTH_API_URL)');
      try {
        const u = new URL(apiUrl);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http(s)');
      } catch {
        throw new UsageError(`--api-url: expected an http(s) URL, got ${JSON.stringify(apiUrl)}`);
      }
      if (!opts.nodeId) throw new UsageError('--node-id is required');
      if (!opts.workDir) throw new UsageError('--work-dir is required');
      if (opts.once !== undefined && !isId('c', opts.once))
        throw new UsageError(`--once: expected a container id (c-…), got ${JSON.stringify(opts.once)}`);
      const killGraceMs = duration('--kill-grace', opts.killGrace);
      const pingWaitMs = duration('--ping-wait', opts.pingWait, 60_000);
      // Loaded on use: other commands do not need the runtimes.
      const { Agent, AgentFatalError } = await import('../../agent/agent.js');
      const agent = new Agent({
        apiUrl,
        nodeId: opts.nodeId,
        bootstrapSecretFile:
          opts.bootstrapSecretFile === '-'
            ? '-'
            : opts.bootstrapSecretFile
              ? resolve(opts.bootstrapSecretFile)
              : null,
        once: opts.once ?? null,
        workDir: resolve(opts.workDir),
        runtime: opts.runtime as never,
        killGraceMs,
        pingWaitMs,
      });
      const onSignal = (sig: NodeJS.Signals) => {
        if (opts.once) {
          // SLURM ends the job (scancel, time limit, node shutdown): nobody re-attaches after a one-shot agent.
          agent.hostEnding(`${sig}: the SLURM job is ending`);
          return;
        }
        process.stderr.write(`berth agent: ${sig}: stopping (containers keep running for the next agent)\n`);
        agent.stop();
      };
      // Never crash on a stray rejection (a daemon): say it and carry on.
      process.on('unhandledRejection', (err) =>
        process.stderr.write(`berth agent: unexpected: ${(err as Error)?.stack ?? String(err)}\n`),
      );
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      let code = 0;
      try {
        await agent.run();
      } catch (err) {
        if (err instanceof AgentFatalError) {
          process.stderr.write(`berth agent: ${err.message}\n`);
          code = err.exitCode;
        } else if ((err as Error).name === 'AbortedError') {
          code = 0; // stopped while registering
        } else {
          process.stderr.write(`berth agent: ${(err as Error).stack ?? String(err)}\n`);
          code = 1;
        }
      }
      // Supervisors of containers left running keep timers; the agent is done with them.
      process.exit(code);
    });
}
