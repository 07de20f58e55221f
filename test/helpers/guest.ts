// Booting a QEMU guest built by scripts/guest/build.sh, for tests that need a kernel set up unlike this
// host's (cgroup v2 only; later: cloud-init, checkpoint/restore). Software emulation (TCG): KVM does not
// run a guest here (ENVIRONMENT.md). The guest's disk is never written (-snapshot); files go in on a
// second, read-only ext4 disk made from a directory, and the guest's console (its only output) comes back
// line by line. The QEMU process is killed and every temporary file removed whatever happens.
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { guestKernelArgs } from '../../src/agent/runtimes/vm-snapshot.js';

const exec = promisify(execFile);

/** Where scripts/guest/build.sh caches its guests. */
export const GUEST_CACHE =
  process.env.BERTH_GUEST_CACHE ?? join(process.env.BERTH_TEST_CACHE ?? '/var/cache/berth-test', 'guest');
/** Where the guest's init mounts the second disk (scripts/guest/guest-init.sh), whose `run` it runs. */
export const GUEST_DATA = '/mnt/data';
const QEMU = process.env.BERTH_QEMU ?? 'qemu-system-x86_64';

/** A built guest: its files and the init its flavour boots. */
export interface GuestImage {
  flavour: string;
  dir: string;
  init: string;
}

/** The built guest of `flavour`, or why it cannot be booted here. */
export function findGuest(flavour = 'test'): GuestImage | string {
  const dir = join(GUEST_CACHE, flavour);
  const build = join(dir, 'build.json');
  if (!existsSync(build))
    return `no ${flavour} guest in ${dir} (run .ci/setup.d/40-guest.sh or scripts/guest/build.sh ${flavour})`;
  const onPath = (process.env.PATH ?? '').split(':').some((d) => existsSync(join(d, QEMU)));
  if (!QEMU.includes('/') ? !onPath : !existsSync(QEMU))
    return `${QEMU} not found (apt-get install qemu-system-x86)`;
  const { init } = JSON.parse(readFileSync(build, 'utf8')) as { init: string };
  return { flavour, dir, init };
}

/** Options of one boot. */
export interface BootOptions {
  /** Files for the second disk (/dev/vdb; the test guest runs its executable `run`). */
  dataDir?: string;
  memoryMiB?: number;
  cpus?: number;
  /** The guest is killed after this long (its result then says so). */
  timeoutMs: number;
  /** Every console line as it comes. */
  onLine?: (line: string) => void;
  /** Extra kernel command line. */
  append?: string;
  /**
   * A NIC on QEMU's user network (default none): the guest (10.0.2.15, set up by its init) reaches this
   * host's loopback as 10.0.2.2; nothing reaches the guest.
   */
  network?: boolean;
}

/** What a boot gave. */
export interface BootResult {
  lines: string[];
  /** QEMU's exit code (0 after the guest powered off), null when it was killed. */
  exitCode: number | null;
  timedOut: boolean;
  /** From QEMU's start to its exit. */
  wallMs: number;
}

/** Boots `guest`, feeds it `dataDir`, and resolves once it powered off (or was killed at the deadline). */
export async function bootGuest(guest: GuestImage, opts: BootOptions): Promise<BootResult> {
  const tmp = await mkdtemp(join(tmpdir(), 'berth-guest-'));
  try {
    const drives = ['-drive', `file=${join(guest.dir, 'rootfs.img')},format=raw,if=virtio`];
    if (opts.dataDir) {
      const img = join(tmp, 'data.img');
      const { stdout } = await exec('du', ['-sm', opts.dataDir]);
      const sizeMiB = Number(stdout.split('\t')[0]) + 16;
      await exec('mkfs.ext4', ['-q', '-F', '-d', opts.dataDir, img, `${sizeMiB}M`]);
      drives.push('-drive', `file=${img},format=raw,if=virtio,readonly=on`);
    }
    const append = guestKernelArgs(guest.init, `quiet ${opts.append ?? ''}`);
    const args = [
      ...['-accel', 'tcg', '-machine', 'q35', '-m', String(opts.memoryMiB ?? 1024)],
      ...['-smp', String(opts.cpus ?? 2), '-nographic', '-no-reboot', '-snapshot'],
      ...['-nic', opts.network ? 'user,model=virtio-net-pci' : 'none'],
      ...['-kernel', join(guest.dir, 'vmlinuz'), '-initrd', join(guest.dir, 'initrd.img')],
      ...drives,
      ...['-append', append],
    ];
    const t0 = performance.now();
    // Its own process group, so that the kill reaches QEMU and anything it started; and a parent-death
    // signal, so that QEMU dies with this process even when it is killed before its clean-up runs.
    const qemu = spawn('setpriv', ['--pdeathsig', 'KILL', '--', QEMU, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, TMPDIR: tmp },
    });
    const lines: string[] = [];
    const take = (line: string): void => {
      // The serial console ends lines with \r\n and may carry terminal escapes.
      // eslint-disable-next-line no-control-regex
      const clean = line.replace(/\r/g, '').replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
      lines.push(clean);
      opts.onLine?.(clean);
    };
    createInterface({ input: qemu.stdout! }).on('line', take);
    createInterface({ input: qemu.stderr! }).on('line', (l) => take(`qemu: ${l}`));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(qemu.pid!);
    }, opts.timeoutMs);
    const exitCode = await new Promise<number | null>((resolve, reject) => {
      qemu.once('error', reject);
      qemu.once('exit', (code) => resolve(code));
    }).finally(() => {
      clearTimeout(timer);
      killGroup(qemu.pid!);
    });
    return { lines, exitCode: timedOut ? null : exitCode, timedOut, wallMs: performance.now() - t0 };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
