// The process runtime's sandbox (DESIGN §8: a container never sees Berth's files, tokens, other containers'
// processes or environments, and writes only in its own work dir). bubblewrap (`bwrap`) builds it:
//
//   namespaces   own pid, ipc, uts, cgroup and (unless network is `host`) net namespaces; its /proc shows
//                only its own processes; in a new net namespace only a loopback interface exists
//   filesystem   an empty root with, read-only, the host's /usr, /bin, /sbin, /lib*, /etc (secrets masked:
//                shadow, sudoers, ssh, ssl/private); a fresh /dev, /proc and /tmp (tmpfs, counted in the
//                container's memory); its work dir (`scratch/`) the only writable host directory, at its
//                host path. Nothing else of the host: no BERTH_HOME, /root, /home, /var, /run, /opt
//   user         as root: a uid of its own (sandboxUid: one per container, from a range no account uses),
//                no capabilities, no_new_privs, set by setpriv inside the sandbox after bwrap's mounts;
//                as another user: that user, in a user namespace that cannot create further ones
//   environment  only the container's own (bwrap --clearenv), passed to bwrap on a file descriptor, so no
//                value appears on a command line (`ps` on the host shows `bwrap --args 3 -- ...`)
//
// Processes: the shim (root, outside) starts bwrap, whose child is the namespace's init (pid 1 inside),
// whose child is the command. Those two bwrap processes are the sandbox's own: signals other than SIGKILL
// go only to the command's processes (see sandboxHelpers), so a TERM trap runs as on any other runtime.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, lstat, readlink } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { probePassed, recordPassed, sandboxProbeKey } from './probe-cache.js';

const exec = promisify(execFile);

/** How image-less containers are isolated: `bwrap` (the default), or `none` (unsafe: a host process). */
export type SandboxSetting = 'bwrap' | 'none';
export const SANDBOX_SETTINGS: readonly SandboxSetting[] = ['bwrap', 'none'];

/** The container's network: `none` (own namespace, loopback only; the default) or the host's. */
export type NetworkSetting = 'none' | 'host';
export const NETWORK_SETTINGS: readonly NetworkSetting[] = ['none', 'host'];

/** Host trees the sandbox shows read-only (what running host commands needs). */
const SYSTEM_TREES = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'];
/** Secrets under /etc that stay hidden even though /etc is shown. */
const ETC_SECRETS = [
  'shadow',
  'shadow-',
  'gshadow',
  'gshadow-',
  'sudoers',
  'sudoers.d',
  'ssh',
  'ssl/private',
  'berth',
];

/** Sandbox uids: [UID_BASE, UID_BASE + UID_SPAN), far above any account's uid and below 2^31. */
export const UID_BASE = 0x7000_0000;
export const UID_SPAN = 0x0100_0000;

/**
 * The uid (and gid) a container runs as when the agent is root: derived from the container id, so a new
 * agent re-attaching finds the same one and two containers share one only by a 1-in-16M chance (then
 * they still cannot see each other: separate pid and mount namespaces; they share RLIMIT_NPROC).
 */
export function sandboxUid(id: string): number {
  const h = createHash('sha256').update(id).digest();
  return UID_BASE + (h.readUInt32BE(0) % UID_SPAN);
}

/** The first executable `name` on PATH (or at the absolute path given), or null. */
export async function findExecutable(name: string, path = process.env.PATH ?? ''): Promise<string | null> {
  const candidates = name.startsWith('/')
    ? [name]
    : [...path.split(delimiter), '/usr/bin', '/bin'].filter(Boolean).map((d) => join(d, name));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      return c;
    } catch {
      // next
    }
  }
  return null;
}

/** What the sandbox needs on this machine. */
export interface SandboxTools {
  bwrap: string;
  /** Present when the agent is root (containers get a uid of their own). */
  setpriv: string | null;
}

const probes = new Map<string, Promise<SandboxTools | string>>();

/**
 * The tools, or why the sandbox cannot run here (bwrap missing, namespaces refused by the kernel or a
 * security module). Probed once per bwrap path and cache file in a process by running a real sandbox with
 * `/bin/true`; with `cacheFile`, a probe that passed with the same key before (probe-cache.ts) is not run
 * again (the one-shot agent: one process per container).
 */
export function probeSandbox(
  bwrapName = 'bwrap',
  cacheFile: string | null = null,
): Promise<SandboxTools | string> {
  const memo = `${bwrapName}\0${cacheFile ?? ''}`;
  let p = probes.get(memo);
  if (!p) {
    p = probeSandboxNow(bwrapName, cacheFile);
    probes.set(memo, p);
  }
  return p;
}

/** probeSandbox without the in-process memo: reads (and after a passed probe writes) the cache file. */
export async function probeSandboxNow(
  bwrapName: string,
  cacheFile: string | null,
): Promise<SandboxTools | string> {
  const bwrap = await findExecutable(bwrapName);
  if (!bwrap)
    return `bubblewrap not found (${bwrapName}; apt-get install bubblewrap, or give its path: --bwrap, BERTH_BWRAP)`;
  const root = process.getuid?.() === 0;
  const setpriv = root ? await findExecutable('/usr/bin/setpriv') : null;
  if (root && !setpriv) return '/usr/bin/setpriv not found (util-linux)';
  const tools = { bwrap, setpriv };
  const key = cacheFile ? await sandboxProbeKey([bwrap, setpriv]).catch(() => null) : null;
  if (cacheFile && key && (await probePassed(cacheFile, key))) return tools;
  const argv = [
    ...namespaceArgs('none', root),
    '--ro-bind',
    '/',
    '/',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--',
    ...dropArgs(tools, sandboxUid('probe')),
    '/bin/true',
  ];
  try {
    await exec(bwrap, argv, { timeout: 10_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    return `bubblewrap cannot create a sandbox here: ${(e.stderr ?? '').trim() || e.message}`;
  }
  // Not recorded (a read-only or missing dir): the next agent probes again, nothing else changes.
  if (cacheFile && key) await recordPassed(cacheFile, key).catch(() => {});
  return tools;
}

function namespaceArgs(network: NetworkSetting, root: boolean): string[] {
  return [
    // As root no user namespace: bwrap would map the container's uid to root outside. As another user
    // bwrap needs one, and the container may not create more (they would give it capabilities there).
    ...(root ? [] : ['--unshare-user', '--disable-userns']),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(network === 'none' ? ['--unshare-net'] : []),
    '--die-with-parent',
    '--new-session',
    // Root keeps only what setpriv needs to switch to the container's uid; setpriv then drops them all.
    ...(root
      ? [
          '--cap-drop',
          'ALL',
          '--cap-add',
          'CAP_SETUID',
          '--cap-add',
          'CAP_SETGID',
          '--cap-add',
          'CAP_SETPCAP',
        ]
      : []),
  ];
}

/** The argv prefix that turns the sandbox's root into the container's uid with no privileges left. */
function dropArgs(tools: SandboxTools, uid: number): string[] {
  if (!tools.setpriv) return [];
  return [
    tools.setpriv,
    `--reuid=${uid}`,
    `--regid=${uid}`,
    '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    '--no-new-privs',
    '--',
  ];
}

/** What to sandbox. */
export interface SandboxRequest {
  id: string;
  command: string[];
  env: Record<string, string>;
  /** Working directory inside the sandbox. */
  cwd: string;
  /** The container's writable directory (host path, shown at the same path). */
  workDir: string;
  network: NetworkSetting;
  /** Host paths that must stay hidden even if they lie under a tree the sandbox shows (BERTH_HOME...). */
  hide: string[];
}

/** A sandboxed command: what the shim runs, and the options bwrap reads from fd 3. */
export interface SandboxPlan {
  argv: string[];
  /** NUL-separated bwrap options, environment included (secret: written 0600 and removed once read). */
  options: Buffer;
  /** The uid the container runs as (null: the agent's own, in a user namespace). */
  uid: number | null;
}

const isUnder = (p: string, base: string): boolean =>
  p === base || p.startsWith(base.endsWith('/') ? base : `${base}/`);

/** The bwrap invocation for one container. */
export async function sandboxPlan(tools: SandboxTools, req: SandboxRequest): Promise<SandboxPlan> {
  const root = tools.setpriv !== null;
  const uid = root ? sandboxUid(req.id) : null;
  const opts: string[] = [...namespaceArgs(req.network, root)];
  const shown: string[] = [];
  for (const tree of SYSTEM_TREES) {
    const st = await lstat(tree).catch(() => null);
    if (!st) continue;
    if (st.isSymbolicLink()) opts.push('--symlink', await readlink(tree), tree);
    else if (st.isDirectory()) {
      opts.push('--ro-bind', tree, tree);
      shown.push(tree);
    }
  }
  const masked: string[] = [];
  for (const m of [...ETC_SECRETS.map((s) => join('/etc', s)), ...req.hide]) {
    if (!shown.some((t) => isUnder(m, t))) continue;
    const st = await lstat(m).catch(() => null);
    if (!st) continue;
    if (st.isDirectory()) {
      opts.push('--tmpfs', m);
      masked.push(m);
    } else opts.push('--ro-bind', '/dev/null', m);
  }
  opts.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp');
  // The work dir's ancestors, created traversable (bwrap would make them 0700, closed to the container),
  // except those that exist in the sandbox already (a shown tree, not below a mask, or the /tmp mount).
  const exists = (d: string): boolean =>
    d === '/tmp' || (shown.some((t) => isUnder(d, t)) && !masked.some((m) => isUnder(d, m) && d !== m));
  const ancestors: string[] = [];
  for (let d = dirname(req.workDir); d !== '/'; d = dirname(d)) ancestors.unshift(d);
  for (const d of ancestors) if (!exists(d)) opts.push('--perms', '0755', '--dir', d);
  opts.push('--bind', req.workDir, req.workDir, '--clearenv');
  for (const [k, v] of Object.entries(req.env)) opts.push('--setenv', k, v);
  for (const o of opts)
    if (o.includes('\0'))
      throw new Error(`sandbox: a value holds a NUL byte (${JSON.stringify(o.slice(0, 40))})`);
  const options = Buffer.from(opts.map((o) => `${o}\0`).join(''));
  // cd after the uid switch: the work dir is the container's (0700), closed to the sandbox's root.
  const argv = [
    tools.bwrap,
    '--args',
    '3',
    '--',
    ...dropArgs(tools, uid ?? 0),
    '/bin/sh',
    '-c',
    'cd "$1" || exit 126; shift; exec "$@"',
    'berth-cd',
    req.cwd,
    ...req.command,
  ];
  return { argv, options, uid };
}
