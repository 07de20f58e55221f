// The OCI runtime config (config.json) runc runs a container from. Based on `runc spec`'s defaults,
// with Berth's changes: no terminal, no network unless the agent is configured for the host's (as for
// every runtime), the container's hard limits, and a cgroup path Berth can read usage from.
import { CFS_PERIOD_US, cfsQuotaUs } from './cgroup.js';

/** What varies between containers in the OCI config. */
export interface OciParams {
  args: string[];
  env: Record<string, string>;
  cwd: string;
  hostname: string;
  /** cgroup path below the hierarchy roots, e.g. "/berth/c1". */
  cgroupsPath: string;
  vcpus: number;
  ram: number;
  /** `none`: a network namespace of its own (runc brings up its loopback); `host`: the host's. */
  network?: 'none' | 'host';
}

const CAPS = [
  'CAP_AUDIT_WRITE',
  'CAP_KILL',
  'CAP_NET_BIND_SERVICE',
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FOWNER',
  'CAP_SETUID',
  'CAP_SETGID',
];
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export function ociConfig(p: OciParams): object {
  const env = { PATH: DEFAULT_PATH, HOME: '/root', ...p.env };
  return {
    ociVersion: '1.0.2-dev',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: p.args,
      env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      cwd: p.cwd,
      capabilities: { bounding: CAPS, effective: CAPS, permitted: CAPS },
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: 1024, soft: 1024 }],
      noNewPrivileges: true,
    },
    root: { path: 'rootfs', readonly: false },
    hostname: p.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      {
        destination: '/dev',
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
      },
      {
        destination: '/dev/pts',
        type: 'devpts',
        source: 'devpts',
        options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
      },
      {
        destination: '/dev/shm',
        type: 'tmpfs',
        source: 'shm',
        options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
      },
      {
        destination: '/dev/mqueue',
        type: 'mqueue',
        source: 'mqueue',
        options: ['nosuid', 'noexec', 'nodev'],
      },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    ],
    linux: {
      cgroupsPath: p.cgroupsPath,
      resources: {
        devices: [{ allow: false, access: 'rwm' }],
        memory: { limit: p.ram, swap: p.ram },
        cpu: { quota: cfsQuotaUs(p.vcpus), period: CFS_PERIOD_US },
      },
      namespaces: [
        { type: 'pid' },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
        ...((p.network ?? 'none') === 'none' ? [{ type: 'network' }] : []),
      ],
      maskedPaths: [
        '/proc/acpi',
        '/proc/asound',
        '/proc/kcore',
        '/proc/keys',
        '/proc/latency_stats',
        '/proc/timer_list',
        '/proc/timer_stats',
        '/proc/sched_debug',
        '/sys/firmware',
        '/proc/scsi',
      ],
      readonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}
