// Network namespaces for local instances (opt-in, root only): each instance's agent runs in its own
// network namespace, joined to the host by a veth pair on a private /30 of its own, and reaches the API
// at the host end's address — as a VM reaches its control plane over a network that can fail. Cutting
// the link (`ip link set HOST_DEV down`) partitions one instance and nothing else.
//
// Addresses come from 10.213.0.0/16 (16,384 /30 subnets); a subnet is chosen at random among those no
// interface of this host uses. Names derive from the instance id, so a namespace or veth left by a crash
// can be found again from the instance list.
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** One instance's namespace and link, as recorded in the instance list. */
export interface NetnsLink {
  /** Namespace name (`ip netns`), e.g. berth-1a2b3c4d. */
  name: string;
  /** The veth end on the host: cut the instance off with `ip link set HOST_DEV down`. */
  hostDev: string;
  /** The host end's address: the agent reaches the API here. */
  hostAddr: string;
  /** The address inside the namespace. */
  nsAddr: string;
}

const BASE = [10, 213];

/** Why namespaces cannot be used here, or null when they can. */
export async function netnsUnusable(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  for (const [bin, args] of [
    ['ip', ['netns', 'list']],
    ['nsenter', ['--version']],
  ] as const) {
    try {
      await run(bin, [...args]);
    } catch (err) {
      return `${bin} is not usable: ${(err as Error).message.split('\n')[0]}`;
    }
  }
  return null;
}

async function usedSubnets(): Promise<Set<number>> {
  const { stdout } = await run('ip', ['-o', '-4', 'addr', 'show']);
  const used = new Set<number>();
  for (const m of stdout.matchAll(/inet (\d+)\.(\d+)\.(\d+)\.(\d+)/g))
    if (Number(m[1]) === BASE[0] && Number(m[2]) === BASE[1])
      used.add(Number(m[3]) * 64 + Math.floor(Number(m[4]) / 4));
  return used;
}

// Creates in this process run one at a time, so that two cannot pick the same free subnet. (Two processes
// creating at the same moment could, with odds of 1 in 16,383.)
let creating: Promise<unknown> = Promise.resolve();

/** Runs `fn` after every create of this process before it: two creates never pick the same subnet. */
function serially<T>(fn: () => Promise<T>): Promise<T> {
  const next = creating.then(fn, fn);
  creating = next.catch(() => {});
  return next;
}

/** A free /30 of 10.213.0.0/16: its first (.1) and second (.2) addresses. */
async function freeSubnet(): Promise<[string, string]> {
  const used = await usedSubnets();
  let subnet = -1;
  for (let i = 0; i < 100 && subnet < 0; i++) {
    const s = randomInt(1, 16384); // subnet 0 (10.213.0.0/30) is never used
    if (!used.has(s)) subnet = s;
  }
  if (subnet < 0) throw new Error('no free /30 in 10.213.0.0/16 for a network namespace');
  const third = Math.floor(subnet / 64);
  const fourth = (subnet % 64) * 4;
  return [`${BASE[0]}.${BASE[1]}.${third}.${fourth + 1}`, `${BASE[0]}.${BASE[1]}.${third}.${fourth + 2}`];
}

/**
 * Creates the namespace and its link for the instance `id` (whose last 8 characters name them). `routes`
 * are host addresses (see createHostAddress) the namespace reaches through its link.
 */
export function createNetns(id: string, routes: string[] = []): Promise<NetnsLink> {
  return serially(() => createOne(id, routes));
}

async function createOne(id: string, routes: string[]): Promise<NetnsLink> {
  const suffix = id.replace(/[^a-z0-9]/gi, '').slice(-8);
  const name = `berth-${suffix}`;
  const hostDev = `bh${suffix}`;
  const nsDev = `bn${suffix}`;
  const [hostAddr, nsAddr] = await freeSubnet();
  const link: NetnsLink = { name, hostDev, hostAddr, nsAddr };
  try {
    await run('ip', ['netns', 'add', name]);
    await run('ip', ['link', 'add', hostDev, 'type', 'veth', 'peer', 'name', nsDev, 'netns', name]);
    await run('ip', ['addr', 'add', `${hostAddr}/30`, 'dev', hostDev]);
    await run('ip', ['link', 'set', hostDev, 'up']);
    await run('ip', ['-n', name, 'addr', 'add', `${nsAddr}/30`, 'dev', nsDev]);
    await run('ip', ['-n', name, 'link', 'set', nsDev, 'up']);
    await run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    for (const addr of routes) await run('ip', ['-n', name, 'route', 'add', `${addr}/32`, 'via', hostAddr]);
  } catch (err) {
    await removeNetns(link);
    throw err;
  }
  return link;
}

/** An address of this host on a link of its own, for servers that namespaces reach through a route. */
export interface HostAddress {
  /** The veth end that holds the address (its peer stays on the host, unused). */
  dev: string;
  addr: string;
}

/**
 * Puts a fresh address of 10.213.0.0/16 on a veth pair of its own (both ends on the host): a private
 * "VPC address" where a server can listen that namespaces created with `routes: [addr]` reach, without
 * touching any interface or address of the host's own.
 */
export function createHostAddress(id: string): Promise<HostAddress> {
  return serially(async () => {
    const suffix = id.replace(/[^a-z0-9]/gi, '').slice(-8);
    const dev = `bv${suffix}`;
    const [addr] = await freeSubnet();
    try {
      await run('ip', ['link', 'add', dev, 'type', 'veth', 'peer', 'name', `bw${suffix}`]);
      await run('ip', ['addr', 'add', `${addr}/32`, 'dev', dev]);
      await run('ip', ['link', 'set', dev, 'up']);
      await run('ip', ['link', 'set', `bw${suffix}`, 'up']);
    } catch (err) {
      await removeHostAddress({ dev, addr });
      throw err;
    }
    return { dev, addr };
  });
}

export async function removeHostAddress(h: HostAddress): Promise<void> {
  await run('ip', ['link', 'del', h.dev]).catch(() => {}); // its peer goes with it
}

/** The command prefix that runs a program inside the namespace (only the network namespace changes). */
export function netnsExec(link: NetnsLink): string[] {
  return ['nsenter', `--net=/run/netns/${link.name}`, '--'];
}

/**
 * Kills whatever still runs in the namespace, then deletes it and the host's veth end. Idempotent. The
 * caller stops the instance's own processes first; deleting a namespace does not kill its processes.
 */
export async function removeNetns(link: NetnsLink): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const pids = await run('ip', ['netns', 'pids', link.name])
      .then((r) => r.stdout.split(/\s+/).filter(Boolean).map(Number))
      .catch(() => [] as number[]);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  await run('ip', ['netns', 'del', link.name]).catch(() => {});
  await run('ip', ['link', 'del', link.hostDev]).catch(() => {}); // gone with its peer, normally
}

/** The API URL with its host replaced by the host end's address, as the agent in the namespace sees it. */
export function apiUrlFor(link: NetnsLink, apiUrl: string): string {
  const u = new URL(apiUrl);
  u.hostname = link.hostAddr;
  return u.toString().replace(/\/$/, '');
}
