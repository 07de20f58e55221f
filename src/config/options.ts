// The process options of `berth server`, `dispatch`, `up`, `agent` and the CLI, each declared once: key,
// kind, default, environment variable, flag, help and the processes that read it. The config file
// ($BERTH_HOME/config.json, or $BERTH_CONFIG), the environment and flags are layered in that order
// (later wins) over the defaults; the CLI adds each option's flag to the commands of the processes that
// read it (src/cli/flags.ts). docs/CONFIG.md is generated from this table (`npm run docs:config`).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, opt, section, type Infer, type Layer, type Option, type Source } from './declare.js';
import { isId } from '../model/ids.js';
import {
  duration,
  Expected,
  hostPort,
  type Kind,
  int,
  nullable,
  num,
  oneOf,
  path,
  size,
  sizeOrZero,
  text,
  url,
} from './kinds.js';
import { NETWORK_SETTINGS, SANDBOX_SETTINGS } from '../agent/runtimes/sandbox.js';
import { VM_ACCELS } from '../agent/runtimes/vm-snapshot.js';

export { ConfigError } from './declare.js';

/** A path, or `-` for stdin. */
const pathOrStdin: Kind<string> = {
  ...path,
  parse: (v, p, ctx) => (v === '-' ? '-' : path.parse(v, p, ctx)),
};

/** A container id. */
const containerId: Kind<string> = {
  type: 'container id',
  placeholder: '<container>',
  parse(v) {
    if (!isId('c', v)) throw new Expected('a container id (c-…)');
    return v;
  },
};

/** What `berth dispatch` runs containers on. */
export const DISPATCH_BACKENDS = ['cloud', 'slurm'] as const;

/** The log levels of pino. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const PROCESS_OPTIONS = section([
  opt({
    key: 'home',
    kind: path,
    default: '~/.berth',
    env: 'BERTH_HOME',
    flag: '--home',
    global: true,
    notInFile: true,
    help: 'Directory for Berth state: embedded PostgreSQL data, tokens, the config file, local instances.',
    usedBy: ['server', 'dispatch', 'up', 'cli'],
  }),
  opt({
    key: 'database_url',
    kind: nullable(url(['postgres', 'postgresql'], 'postgres://berth@db.example/berth')),
    default: null,
    env: 'BERTH_DATABASE_URL',
    flag: '--database-url',
    help: 'PostgreSQL URL (>= 14). Unset: Berth runs its own embedded PostgreSQL under `home`.',
    usedBy: ['server', 'dispatch', 'up'],
  }),
  opt({
    key: 'listen',
    kind: hostPort,
    default: '127.0.0.1:8470',
    env: 'BERTH_LISTEN',
    flag: '--listen',
    help: 'Address the API server listens on (HOST:PORT; port 0 picks a free one).',
    usedBy: ['server', 'up'],
  }),
  opt({
    key: 'api_url',
    kind: nullable(url(['http', 'https'], 'http://127.0.0.1:8470')),
    default: null,
    env: 'BERTH_API_URL',
    flag: '--api-url',
    global: true,
    help: 'API URL for the CLI, for `berth dispatch` (it goes into the boot data of instances) and for the agent. Unset: the URL the local server wrote to `home`.',
    usedBy: ['cli', 'dispatch', 'agent'],
  }),
  opt({
    key: 'token',
    kind: nullable(text()),
    default: null,
    env: 'BERTH_TOKEN',
    flag: '--token',
    global: true,
    help: 'Bearer token for the CLI. Unset: the admin token the local server saved in `home`.',
    usedBy: ['cli'],
  }),
  opt({
    key: 'log_level',
    kind: oneOf(LOG_LEVELS, '<level>'),
    default: 'warn',
    env: 'BERTH_LOG_LEVEL',
    flag: '--log-level',
    help: 'Log level.',
    usedBy: ['server', 'dispatch', 'up', 'agent'],
  }),
  opt({
    key: 'max_dispatch_attempts',
    kind: int(1),
    default: 10,
    env: 'BERTH_MAX_DISPATCH_ATTEMPTS',
    flag: '--max-dispatch-attempts',
    help:
      'A container is cancelled (perm) when its N-th lock ends without a start (an unlock, a lost ' +
      'dispatcher or node), instead of going back to the queue. The server stores the value in the ' +
      'database at start; the store and every dispatcher read it from there.',
    usedBy: ['server', 'up'],
  }),
  opt({
    key: 'body_limit',
    kind: size,
    default: '1MiB',
    env: 'BERTH_BODY_LIMIT',
    flag: '--body-limit',
    help: 'Largest API request body (batch submissions and log appends allow 16 times this).',
    usedBy: ['server', 'up'],
  }),
  opt({
    key: 'dispatch_config',
    kind: nullable(path),
    default: null,
    defaultText: 'none (`berth up`: instance types sized for this machine)',
    env: 'BERTH_DISPATCH_CONFIG',
    flag: '--config',
    help: 'The dispatch config file (JSON; its keys are in docs/CONFIG.md).',
    usedBy: ['dispatch', 'up'],
  }),
  opt({
    key: 'cloud',
    kind: oneOf(['local', 'ec2-emulated'], '<cloud>'),
    default: 'local',
    env: 'BERTH_CLOUD',
    flag: '--cloud',
    help:
      "`berth up`'s cloud: `local` (instances are `berth agent` processes here) or `ec2-emulated` (the ec2 " +
      "driver against an EC2 emulated here: moto behind Berth's fault proxy, each instance's boot script " +
      'run for real; needs `moto_server`; brings its own dispatch config). See docs/AWS.md.',
    usedBy: ['up'],
  }),
  opt({
    key: 'backend',
    kind: nullable(oneOf(DISPATCH_BACKENDS)),
    default: null,
    defaultText: "the config file's `backend`, else `cloud`",
    env: 'BERTH_DISPATCH_BACKEND',
    flag: '--backend',
    help:
      'What the dispatcher runs containers on: `cloud` (instances it creates through a driver) or `slurm` ' +
      '(jobs on an existing SLURM cluster; its config keys are in docs/SLURM.md).',
    usedBy: ['dispatch'],
  }),
  opt({
    key: 'node_id',
    kind: nullable(text()),
    default: null,
    defaultText: 'required',
    env: 'BERTH_NODE_ID',
    flag: '--node-id',
    help: 'The node id the dispatcher recorded for this instance.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'bootstrap_secret_file',
    kind: nullable(pathOrStdin),
    default: null,
    env: 'BERTH_BOOTSTRAP_SECRET_FILE',
    flag: '--bootstrap-secret-file',
    help: 'File holding the one-time bootstrap secret (needed at the first start only; `-` reads it from stdin).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'once',
    kind: nullable(containerId),
    default: null,
    flag: '--once',
    help:
      'One-shot mode (the jobs of the slurm backend, docs/SLURM.md): run this container only, then exit; ' +
      'SIGTERM stops it and reports it cancelled (temp) so that it is retried.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'work_dir',
    kind: nullable(path),
    default: null,
    defaultText: 'required',
    env: 'BERTH_WORK_DIR',
    flag: '--work-dir',
    help: "The agent's state and the containers' work directories.",
    usedBy: ['agent'],
  }),
  opt({
    key: 'runtime',
    kind: text('auto or a runtime name', /^[a-z][a-z0-9-]*$/, '<name>'),
    default: 'auto',
    env: 'BERTH_RUNTIME',
    flag: '--runtime',
    help:
      'Container runtime: `auto` (the best that works here), or docker, podman, runc, process (the agent ' +
      'says which it knows), or vm (each container in its own QEMU guest; never chosen by `auto`: ' +
      'docs/RUNTIMES.md).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'kill_grace',
    kind: duration(),
    default: '30s',
    env: 'BERTH_KILL_GRACE',
    flag: '--kill-grace',
    help: 'Time between SIGTERM and SIGKILL when a container is stopped.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'ping_wait',
    kind: duration({ above0: true, max: '60s' }),
    default: '10s',
    env: 'BERTH_PING_WAIT',
    flag: '--ping-wait',
    help: 'How long one ping waits for work (a long poll: an assignment ends it at once).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'imds_url',
    kind: nullable(text('an http base URL such as http://169.254.169.254', /^http:\/\/[^\s/]+\/?$/, '<url>')),
    default: null,
    env: 'BERTH_IMDS_URL',
    flag: '--imds-url',
    help:
      "The cloud instance's metadata service (IMDSv2), e.g. http://169.254.169.254: the agent reports the " +
      'instance id at registration and watches for spot interruption notices and rebalance ' +
      "recommendations (docs/AWS.md). The ec2 driver's boot script sets it. Unset: not on a cloud instance.",
    usedBy: ['agent'],
  }),
  opt({
    key: 'notice_poll',
    kind: duration({ min: '100ms' }),
    default: '5s',
    env: 'BERTH_NOTICE_POLL',
    flag: '--notice-poll',
    help: 'How often the agent asks the metadata service (`imds_url`) for notices.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'process_sandbox',
    kind: oneOf(SANDBOX_SETTINGS, '<kind>'),
    default: 'bwrap',
    env: 'BERTH_PROCESS_SANDBOX',
    flag: '--process-sandbox',
    help:
      'How containers without an image are isolated: `bwrap` (bubblewrap: own namespaces and uid, a ' +
      'read-only view of the system, only its work dir writable; where bubblewrap cannot run, such ' +
      "containers are refused) or `none` (UNSAFE: a plain host process that can read Berth's tokens; only " +
      'where every user is trusted). See docs/SECURITY.md. `berth up` passes it on to its agents and warns ' +
      'when they will refuse such containers or run them unsandboxed.',
    usedBy: ['agent', 'up'],
  }),
  opt({
    key: 'bwrap',
    kind: text('a program name or an absolute path', /^(\/.*|[^/]+)$/, '<path>'),
    default: 'bwrap',
    env: 'BERTH_BWRAP',
    flag: '--bwrap',
    help:
      'The bubblewrap executable of the process sandbox: a name looked up on PATH, or an absolute path ' +
      '(`berth up` passes it on to its agents).',
    usedBy: ['agent', 'up'],
  }),
  opt({
    key: 'process_criu',
    kind: nullable(text('a program name or an absolute path', /^(\/.*|[^/]+)$/, '<path>')),
    default: null,
    env: 'BERTH_PROCESS_CRIU',
    flag: '--process-criu',
    help:
      'The criu program (e.g. `criu`) with which the agent saves a reclaimed image-less container whole ' +
      '(its memory and open files, resumed where it stood by its next attempt on such an instance) instead ' +
      'of asking it (SIGUSR1) to write its own checkpoint. Only with `process_sandbox` `none` and where ' +
      '`criu check` passes (the agent logs why not otherwise, and keeps the application-assisted way). ' +
      'Unset: never. See docs/RUNTIMES.md (CRIU).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'runc_criu',
    kind: nullable(text('a program name or an absolute path', /^(\/.*|[^/]+)$/, '<path>')),
    default: null,
    env: 'BERTH_RUNC_CRIU',
    flag: '--runc-criu',
    help:
      'The criu program (e.g. `criu`) with which the `runc` runtime saves a reclaimed container whole ' +
      '(`runc checkpoint`: its memory, open files and writable layer, resumed where it stood by its next ' +
      'attempt on another runc instance) instead of killing it. Only where `criu check` passes (the agent ' +
      'logs why not otherwise, and reclaims as before). Unset: never. See docs/RUNTIMES.md (CRIU).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'vm_guest',
    kind: nullable(path),
    default: null,
    defaultText: 'the `test` guest of scripts/guest/build.sh (/var/cache/berth-test/guest/test)',
    env: 'BERTH_VM_GUEST',
    flag: '--vm-guest',
    help:
      "The `vm` runtime's guest: a directory with vmlinuz, initrd.img, rootfs.img and build.json, as " +
      '`scripts/guest/build.sh test` makes it. Without it, `--runtime vm` refuses to start, saying so.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'vm_accel',
    kind: oneOf(VM_ACCELS, '<accel>'),
    default: 'tcg',
    env: 'BERTH_VM_ACCEL',
    flag: '--vm-accel',
    help:
      'How the `vm` runtime runs guests: `tcg` (software emulation: works everywhere, boots in seconds) ' +
      'or `kvm` (hardware virtualisation, where /dev/kvm runs guests: bare metal or nested-virtualisation ' +
      'instances).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'cgroup_parent',
    kind: text(
      'a cgroup path below the hierarchy root: names of letters, digits, "_", "-" and "." separated by "/"',
      /^(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/,
      '<path>',
    ),
    default: 'berth',
    env: 'BERTH_CGROUP_PARENT',
    flag: '--cgroup-parent',
    help:
      "The cgroup under which the agent creates its containers' groups (`<parent>/<container id>`, below " +
      "/sys/fs/cgroup or each v1 hierarchy). The local driver sets it to the instance's slice " +
      '(`berth-local/<instance>/containers`), so that its containers count in the instance and its ' +
      'teardown kills them with it.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'container_network',
    kind: oneOf(NETWORK_SETTINGS, '<kind>'),
    default: 'none',
    env: 'BERTH_CONTAINER_NETWORK',
    flag: '--container-network',
    help: "The containers' network on every runtime: `none` (a network namespace with only loopback) or `host`.",
    usedBy: ['agent'],
  }),
  opt({
    key: 'log_limit',
    kind: sizeOrZero('64KiB', 'no limit'),
    default: '64MiB',
    env: 'BERTH_LOG_LIMIT',
    flag: '--log-limit',
    help:
      'Output stored per container: the first half of the limit (stdout and stderr together), then the ' +
      'last quarter of each stream; what was left out is noted in its log (docs/RUNTIMES.md). Output on ' +
      "the instance's disk counts against the container's scratch.",
    usedBy: ['agent'],
  }),
  opt({
    key: 'pressure_interval',
    kind: duration({ min: '10ms', max: '10s' }),
    default: '50ms',
    env: 'BERTH_PRESSURE_INTERVAL',
    flag: '--pressure-interval',
    help:
      "How often the agent samples the instance's memory (and PSI) while opportunistic containers run, to " +
      'freeze and hand them back when guaranteed containers claim their capacity (docs/RUNTIMES.md).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'pressure_headroom',
    kind: size,
    default: '64MiB',
    env: 'BERTH_PRESSURE_HEADROOM',
    flag: '--pressure-headroom',
    help:
      'Free memory under which the instance is under pressure: the agent then freezes every opportunistic ' +
      'container and ends the fewest that bring free memory back over the headroom plus `pressure_margin`.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'pressure_margin',
    kind: size,
    default: '32MiB',
    env: 'BERTH_PRESSURE_MARGIN',
    flag: '--pressure-margin',
    help: 'Memory freed on top of the headroom when opportunistic containers are reclaimed (so one reclaim is enough).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'pressure_cpu',
    kind: nullable(int(1, 100)),
    default: null,
    env: 'BERTH_PRESSURE_CPU',
    flag: '--pressure-cpu',
    help:
      "CPU pressure without PSI: a percentage of the instance's vcpus (`instance_vcpus`) which, once the " +
      "containers' group uses it between two samples, makes the agent reclaim opportunistic containers (the " +
      'fewest that bring it back under). Unset: CPU use is not a signal.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'pressure_psi',
    kind: nullable(int(1, 100)),
    default: null,
    env: 'BERTH_PRESSURE_PSI',
    flag: '--pressure-psi',
    help:
      'A PSI "some avg10" percentage (memory or CPU; the containers\' group on cgroup v2, the host on v1) ' +
      'at which the instance is under pressure too. Unset: PSI is not a signal.',
    usedBy: ['agent'],
  }),
  opt({
    key: 'checkpoint_limit',
    kind: size,
    default: '256MiB',
    env: 'BERTH_CHECKPOINT_LIMIT',
    flag: '--checkpoint-limit',
    help:
      'The largest checkpoint kept per request (the tar archive of $BERTH_CHECKPOINT_DIR, or of a vm ' +
      "container's whole state): the agent does not upload a larger one (an event and the container log say " +
      'so), and the API refuses one (0: no checkpoints). The default fits a 256 MiB vm guest whose memory is ' +
      'all in use (its state is at most its memory, plus its 8 MiB data disk); an idle 224 MiB guest is a ' +
      '~98 MiB archive. The API streams it into PostgreSQL and back, never holding it whole; the agent holds ' +
      'one archive in memory while sending it.',
    usedBy: ['agent', 'server', 'up'],
  }),
  opt({
    key: 'checkpoint_wait',
    kind: duration({ max: '10m' }),
    default: '5s',
    env: 'BERTH_CHECKPOINT_WAIT',
    flag: '--checkpoint-wait',
    help:
      'How long a reclaimed container may take, after SIGUSR1, to write its checkpoint and exit before it ' +
      'is killed (0: killed at once, no checkpoint asked for).',
    usedBy: ['agent'],
  }),
  opt({
    key: 'instance_ram',
    kind: nullable(size),
    default: null,
    env: 'BERTH_INSTANCE_RAM',
    flag: '--instance-ram',
    help:
      'The memory the containers may use together, for the pressure watcher. Unset: the limit of the ' +
      "containers' parent group (`cgroup_parent`), else the host's memory.",
    usedBy: ['agent'],
  }),
  opt({
    key: 'instance_vcpus',
    kind: nullable(num(0, { above: true, max: 1024, what: 'a number of vcpus' })),
    default: null,
    env: 'BERTH_INSTANCE_VCPUS',
    flag: '--instance-vcpus',
    help: "The vcpus the containers may use together, for `pressure_cpu`. Unset: the host's CPUs.",
    usedBy: ['agent'],
  }),
]);

type ProcessOption = (typeof PROCESS_OPTIONS.options)[number];
export type OptionKey = ProcessOption['key'];

/** The compiled process options. */
export type Config = Infer<ProcessOption>;

/** The declared source of an option's value in a layer. */
const envSource = (o: Option): Source => ({ env: o.env! });
const flagSource = (o: Option): Source => ({ flag: o.flag! });

function envLayer(env: NodeJS.ProcessEnv): Layer {
  const values: Record<string, unknown> = {};
  for (const o of PROCESS_OPTIONS.options) {
    const v = o.env === undefined ? undefined : env[o.env];
    if (v !== undefined && v !== '') values[o.key] = v; // an empty variable is unset
  }
  return { values, source: envSource, text: true };
}

function fileLayer(file: string): Layer | null {
  if (!existsSync(file)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError('', `not valid JSON (${(err as Error).message})`, { file });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError('', 'expected a JSON object of options', { file });
  return { values: parsed as Record<string, unknown>, source: { file }, file: true };
}

/**
 * Loads the process options: defaults, then BERTH_HOME/config.json (or $BERTH_CONFIG), then the
 * environment, then `flags` (by option key, as given on the command line). Errors name the key and
 * where its value came from.
 */
export function loadConfig(
  flags: Partial<Record<OptionKey, unknown>> = {},
  env: NodeJS.ProcessEnv = process.env,
): Config {
  const late: Layer[] = [envLayer(env), { values: flags, source: flagSource, text: true }];
  // The file is found through `home`, which only the environment and flags can set.
  const { home } = PROCESS_OPTIONS.compile(late);
  const file = fileLayer(env.BERTH_CONFIG || join(home, 'config.json'));
  return PROCESS_OPTIONS.compile(file ? [file, ...late] : late);
}

/** The value of an option the process cannot run without; unset, an error saying how to set it. */
export function required<K extends OptionKey>(cfg: Config, key: K): NonNullable<Config[K]> {
  const v = cfg[key];
  if (v !== null && v !== undefined) return v as NonNullable<Config[K]>;
  const o = PROCESS_OPTIONS.option(key);
  throw new ConfigError(key, `required: set ${o.flag} or $${o.env}`);
}
