// `berth agent`: the process on an instance that runs the containers assigned to its node (DESIGN §5).
import type { Command } from 'commander';
import { errorFields, processLogger } from '../../log/logger.js';
import { required } from '../../config/options.js';
import { configFor, withOptionFlags } from '../flags.js';

export function registerAgent(program: Command): void {
  withOptionFlags(program.command('agent'), 'agent')
    .description(
      "run a node's agent: register, ping for work, run containers under hard limits, report " +
        '(with the global --api-url URL, or $BERTH_API_URL)',
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const cfg = configFor(cmd);
      const [apiUrl, nodeId, workDir] = [
        required(cfg, 'api_url'),
        required(cfg, 'node_id'),
        required(cfg, 'work_dir'),
      ];
      const logger = processLogger('berth agent', cfg.log_level, { config: cfg });
      // Loaded on use: other commands do not need the runtimes.
      const { Agent, AgentFatalError } = await import('../../agent/agent.js');
      const agent = new Agent({
        apiUrl,
        nodeId,
        bootstrapSecretFile: cfg.bootstrap_secret_file,
        once: cfg.once,
        workDir,
        runtime: cfg.runtime as never,
        killGraceMs: cfg.kill_grace,
        pingWaitMs: cfg.ping_wait,
        logger,
        processSandbox: cfg.process_sandbox,
        bwrap: cfg.bwrap,
        processCriu: cfg.process_criu,
        runcCriu: cfg.runc_criu,
        vmGuest: cfg.vm_guest,
        vmAccel: cfg.vm_accel,
        containerNetwork: cfg.container_network,
        cgroupParent: cfg.cgroup_parent,
        logLimitBytes: cfg.log_limit,
        imdsUrl: cfg.imds_url,
        noticePollMs: cfg.notice_poll,
        pressure: {
          intervalMs: cfg.pressure_interval,
          headroomBytes: cfg.pressure_headroom,
          marginBytes: cfg.pressure_margin,
          psiPercent: cfg.pressure_psi,
          cpuPercent: cfg.pressure_cpu,
          instanceRam: cfg.instance_ram,
          instanceVcpus: cfg.instance_vcpus,
        },
        checkpointLimitBytes: cfg.checkpoint_limit,
        checkpointWaitMs: cfg.checkpoint_wait,
      });
      const onSignal = (sig: NodeJS.Signals) => {
        if (cfg.once) {
          // SLURM ends the job (scancel, time limit, node shutdown): nobody re-attaches after a one-shot agent.
          agent.hostEnding(`${sig}: the SLURM job is ending`);
          return;
        }
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
