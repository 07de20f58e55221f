// `berth up` run the way a terminal or a supervisor runs it: in a process group of its own (a terminal's
// foreground job; spawn's detached makes the child a group leader), so that a test can signal the whole
// group as Ctrl-C and `kill -TERM -- -PGID` do. And the check that nothing of a home is left afterwards.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { processGroupMembers } from '../../src/agent/runtimes/procfs.js';
import { LocalDriver } from '../../src/cloud/local/driver.js';
import { BIN, ROOT, until } from './cli.js';

export interface GroupProcess {
  child: ChildProcess;
  /** The process group (the child's pid: it leads it). */
  pgid: number;
  output(): string;
  /** Resolves with the exit code (128 + n when killed by signal n) and the time of the exit. */
  exited: Promise<{ code: number; at: number }>;
}

const SIGNAL_NUMBERS: Record<string, number> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

/** Starts `berth ARGS` as the leader of a new process group: `node bin/berth.js ARGS` or `npx berth ARGS`. */
export function spawnGroup(
  args: string[],
  env: NodeJS.ProcessEnv,
  via: 'node' | 'npx' = 'node',
): GroupProcess {
  const [cmd, argv] = via === 'npx' ? ['npx', ['berth', ...args]] : [process.execPath, [BIN, ...args]];
  const child = spawn(cmd, argv, {
    cwd: ROOT, // npx finds this package's own `berth` here
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number; at: number }>((r) =>
    child.on('exit', (code, sig) =>
      r({ code: code ?? 128 + (SIGNAL_NUMBERS[sig ?? ''] ?? 0), at: Date.now() }),
    ),
  );
  return { child, pgid: child.pid!, output: () => out, exited };
}

/** SIGKILLs whatever is left of the group (cleanup after a failed test). */
export function killGroup(p: GroupProcess): void {
  try {
    process.kill(-p.pgid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

export interface LocalInstance {
  id: string;
  state: string;
  cgroup: string | null;
}

export function localInstances(home: string): LocalInstance[] {
  const f = join(home, 'instances.json');
  if (!existsSync(f)) return [];
  return (JSON.parse(readFileSync(f, 'utf8')) as { instances: LocalInstance[] }).instances;
}

/**
 * Destroys the local instances a dispatcher's home still lists — a dispatcher leaves them running when it
 * stops (as a cloud's VMs outlive it), and one killed with SIGKILL leaves them too — which stops their
 * agents and containers and removes their cgroups and directories. Returns the instance cgroup directories
 * still present afterwards, in any hierarchy (none when everything went).
 */
export async function destroyLocalInstances(home: string): Promise<string[]> {
  const driver = new LocalDriver({ home });
  const instances = localInstances(home);
  for (const i of instances) if (i.state !== 'terminated') await driver.destroy(i.id).catch(() => {});
  return instances.flatMap((i) =>
    i.cgroup === null
      ? []
      : readdirSync('/sys/fs/cgroup')
          .map((h) => join('/sys/fs/cgroup', h, i.cgroup!))
          .filter(existsSync),
  );
}

/** A request through the API of a running `berth up` whose container runs until killed; marked for finding. */
export async function startSleeper(
  url: string,
  token: string,
  marker: string,
): Promise<{ request: string; container: string }> {
  const api = async (path: string, body?: unknown) => {
    const r = await fetch(`${url}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  };
  const req = await api('/v1/requests', {
    name: marker,
    command: ['/bin/sh', '-c', `echo ${marker}; exec sleep 600`],
    vcpus: 0.5,
    ram: '64MiB',
  });
  const container = req.container_id as string;
  await until(
    async () => (await api(`/v1/containers/${container}`)).state === 'Running',
    120_000,
    `container ${container} to run`,
  );
  return { request: req.id as string, container };
}

const HIERARCHIES = existsSync('/sys/fs/cgroup') ? readdirSync('/sys/fs/cgroup') : [];

/**
 * What is left of a stopped `berth up`: live processes of its group, or whose command line or working
 * directory is in its home or mentions `marker`; cgroups of its instances and containers; instances the
 * local driver still lists as running. Empty when everything is gone.
 */
export async function leftovers(
  home: string,
  o: { pgid: number; marker?: string; instances?: LocalInstance[]; containers?: string[] },
): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await processGroupMembers(o.pgid)) found.push(`process ${pid} of group ${o.pgid}`);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (/^\S+ \(.*\) Z/.test(stat)) continue; // a zombie is already dead
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      if (cmd.includes(home) || (o.marker && cmd.includes(o.marker)) || cwd.startsWith(home))
        found.push(`process ${name} (cwd ${cwd}): ${cmd}`);
    } catch {
      /* exited meanwhile, or not ours to read */
    }
  }
  const cgroups = [
    ...(o.instances ?? []).flatMap((i) => (i.cgroup ? [i.cgroup] : [])),
    ...(o.containers ?? []).map((c) => `berth/${c}`),
  ];
  for (const h of HIERARCHIES)
    for (const cg of cgroups)
      if (existsSync(join('/sys/fs/cgroup', h, cg))) found.push(`cgroup /sys/fs/cgroup/${h}/${cg}`);
  for (const i of localInstances(home))
    if (i.state !== 'terminated') found.push(`instance ${i.id} still listed as ${i.state}`);
  return found;
}
