// The `vm` runtime (issue 16 item 3, docs/RUNTIMES.md): each container runs in its own small QEMU guest,
// booted from the guest image scripts/guest/build.sh makes (kernel, initrd, an ext4 root the guest never
// writes: -snapshot). The RunSpec goes in on a second, read-only disk (mkfs.ext4 -d): `run`, the guest-side
// script below, and `spec.sh`, the command, environment, working directory and limits as shell words. The
// guest's init (scripts/guest/guest-init.sh) runs `run`, then powers off.
//
// The guest's four serial ports are its wires to the host:
//   ttyS0  the console → `console` in the work dir; `run` ends with the line "berth-vm-exit CODE OOMS PEAK
//          CPU_USEC" there, which is how the exit code survives an agent restart
//   ttyS1  the command's stdout → `stdout`;  ttyS2  its stderr → `stderr` (files QEMU appends to)
//   ttyS3  control, a socket (`ctl.sock`): signals in ("sig TERM"), usage samples out every 0.25 s
// Limits: guest memory = ram + GUEST_OVERHEAD_MIB, -smp = ceil(vcpus); inside the guest the command runs in
// a cgroup v2 group with memory.max = ram and cpu.max = vcpus, whose counters are the usage reported (the
// QEMU process's own CPU and memory are emulation, not the container's work). The QEMU process runs in the
// container's host cgroup (like the process runtime's shim) with its guest memory + QEMU_OVERHEAD_MIB.
// Freeze is QMP `stop` (the whole guest), thaw `cont`; SIGKILL ends QEMU; other signals go through ttyS3
// to every process of the guest group. checkpoint() saves the whole guest to a file (vm-snapshot.ts) and
// restore() resumes it in another work dir, on this or another instance.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import {
  access,
  mkdtemp,
  rename,
  constants as fsConstants,
  copyFile,
  mkdir,
  open,
  readdir,
  readFile,
  rm,
  stat,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CGROUP_ROOT, cgroupAt, containerCgroup, killCgroup, probeCgroups, type Cgroup } from './cgroup.js';
import { readCheckpointRecord, type FieldRule } from './criu.js';
import { outputDiskUsage } from './du.js';
import { signalOf } from './engine-handle.js';
import { RuntimeTransientError } from './errors.js';
import { OncePerKey } from './once.js';
import { isAlive, processRef } from './procfs.js';
import { collectOnce, pollUntilEnded, saveResult } from './result-file.js';
import { MOVED_FILE, clearRunFiles, readRunState, writeRunState, type RunState } from './shim.js';
import { tailFiles } from './tail.js';
import {
  RunSpecError,
  validateSpec,
  type ExitInfo,
  type OutputChunk,
  type RunHandle,
  type RunSpec,
  type Runtime,
  type Usage,
  type WholeState,
} from './types.js';
import {
  guestKernelArgs,
  Qmp,
  qemuArgs,
  resumeIncoming,
  saveVm,
  TCG_CACHE_MIB,
  Vm,
  VM_ACCELS,
  type VmAccel,
  type VmMachine,
} from './vm-snapshot.js';

const exec = promisify(execFile);
const MiB = 1024 * 1024;

/** Guest memory beyond the container's `ram`: the guest kernel, its init and the helpers of `run`. */
export const GUEST_OVERHEAD_MIB = 160;
/** Host memory beyond the guest's for the QEMU process itself: its code and devices, and the TCG cache. */
export const QEMU_OVERHEAD_MIB = 128 + TCG_CACHE_MIB;
/** The container's writable directory and default cwd in the guest (tmpfs: it travels with a checkpoint). */
export const GUEST_SCRATCH = '/tmp/scratch';
const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Where scripts/guest/build.sh leaves the `test` guest (the agent's `vm_guest` names another). */
export const DEFAULT_VM_GUEST = join(
  process.env.BERTH_GUEST_CACHE ?? join(process.env.BERTH_TEST_CACHE ?? '/var/cache/berth-test', 'guest'),
  'test',
);

/** Files of the work dir besides the shim runtimes' (clearRunFiles). */
const VM_FILES = ['console', 'qemu.log', 'killed', 'data.img', 'qmp.sock', 'ctl.sock', 'qemu.pid'];

/** What the guest's `run` prints on its console once it waits for a spec (a template is saved then). */
const READY_LINE = 'berth-vm: waiting for a spec';

// The guest side, run by the guest's init from the data disk. It waits for its spec (spec.sh as base64
// lines, then "."), which comes over the control port: a guest waiting there is saved once per machine
// shape as a template, and every start restores a template instead of booting. fd 5, 6 hold the output ports open for the
// whole run (their raw mode then stays set) and fd 7 the control port. After the command, `stty` drains the
// output ports (it sets the mode with TCSADRAIN) before the exit line goes to the console.
const GUEST_RUN = `#!/bin/sh
exec 5>/dev/ttyS1 6>/dev/ttyS2 7<>/dev/ttyS3
for t in 1 2 3; do stty -F /dev/ttyS$t raw -echo -ixon; done
echo "${READY_LINE}"
while read -r line <&7 && [ "$line" != . ]; do printf '%s\n' "$line"; done | base64 -d >/tmp/spec.sh
. /tmp/spec.sh
g=/sys/fs/cgroup/berth
echo '+memory +cpu' >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p $g ${GUEST_SCRATCH}
echo "$ram" >$g/memory.max
echo 0 >$g/memory.swap.max 2>/dev/null
echo "$cpu_max" >$g/cpu.max
(while read -r what arg; do
  [ "$what" = sig ] && for p in $(cat $g/cgroup.procs); do kill -s "$arg" "$p" 2>/dev/null; done
done) <&7 &
reader=$!
(while :; do
  read -r _ cpu <$g/cpu.stat; read -r cur <$g/memory.current; read -r peak <$g/memory.peak
  echo "u $cpu $cur $peak $(du -sk ${GUEST_SCRATCH} | cut -f1)" >&7
  sleep 0.25
done) &
sampler=$!
# The helpers before the command: a busy command must not starve the samples and the signals.
echo 1 >$g/cpu.weight
renice -n -20 -p $reader $sampler >/dev/null
(echo 0 >$g/cgroup.procs; cd "$cwd" || { echo "berth: cannot cd to $cwd" >&2; exit 126; }; exec "$@") </dev/null >&5 2>&6 &
wait $!
code=$?
kill $reader $sampler 2>/dev/null
stty -F /dev/ttyS1 raw; stty -F /dev/ttyS2 raw
oom=$(grep '^oom_kill ' $g/memory.events | cut -d' ' -f2)
read -r _ cpu <$g/cpu.stat; read -r peak <$g/memory.peak
printf '\\nberth-vm-exit %s %s %s %s\\n' "$code" "\${oom:-0}" "$peak" "$cpu"
`;

const EXIT_LINE = /^berth-vm-exit (\d+) (\d+) (\d+) (\d+)$/m;

/** Whether the guest in `workDir` reported its command's exit on its console (it then powers off). */
export async function guestReportedExit(workDir: string): Promise<boolean> {
  const text = await readFile(join(workDir, 'console'), 'utf8').catch(() => '');
  return EXIT_LINE.test(text.replace(/\r/g, ''));
}

/** A word for the guest's shell. */
function shellWord(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** How the vm runtime boots its guests. */
export interface VmRuntimeOptions {
  /** A directory with vmlinuz, initrd.img, rootfs.img and build.json (scripts/guest/build.sh). */
  guestDir?: string;
  /** QEMU's system emulator (default qemu-system-x86_64 on PATH). */
  qemu?: string;
  /** `tcg` (default: software emulation, works everywhere) or `kvm` (where /dev/kvm runs guests). */
  accel?: VmAccel;
  /** Where the cgroup hierarchies are mounted, and the parent of the containers' groups. */
  cgroupRoot?: string;
  cgroupParent?: string;
  /** Where the saved guests that wait for a spec are kept, one per machine shape (default: in tmpdir). */
  templateDir?: string;
  /** How long start() waits for the guest to boot and start the command (default 300 s). */
  bootDeadlineMs?: number;
}

/** Runs each container in its own QEMU guest. */
export class VmRuntime implements Runtime {
  readonly name = 'vm';

  /** A reclaim saves the whole guest (VmHandle.checkpoint) and the next attempt resumes it (restore). */
  readonly wholeState: WholeState = {
    save: (handle, dir) => {
      if (!(handle instanceof VmHandle))
        throw new Error(`not a vm container: ${handle.id} (${handle.runtime})`);
      return handle.checkpoint(dir);
    },
    restore: (spec, dir) => this.restore(spec, dir),
  };

  constructor(private readonly opts: VmRuntimeOptions = {}) {}

  private get guestDir(): string {
    return this.opts.guestDir ?? DEFAULT_VM_GUEST;
  }

  private get qemu(): string {
    return this.opts.qemu ?? 'qemu-system-x86_64';
  }

  private get accel(): VmAccel {
    return this.opts.accel ?? 'tcg';
  }

  async available(): Promise<string | null> {
    for (const f of ['vmlinuz', 'initrd.img', 'rootfs.img', 'build.json'])
      if (!existsSync(join(this.guestDir, f)))
        return `no guest image: ${join(this.guestDir, f)} missing (build it with scripts/guest/build.sh test, or set vm_guest)`;
    if (!(await onPath(this.qemu))) return `${this.qemu} not found (apt-get install qemu-system-x86)`;
    if (!(await onPath('mkfs.ext4'))) return 'mkfs.ext4 not found (apt-get install e2fsprogs)';
    if (
      this.accel === 'kvm' &&
      !(await access('/dev/kvm', fsConstants.R_OK | fsConstants.W_OK).then(
        () => true,
        () => false,
      ))
    )
      return 'accel kvm: /dev/kvm cannot be opened (use accel tcg)';
    return null;
  }

  async start(spec: RunSpec): Promise<VmHandle> {
    validateSpec(spec);
    if (spec.gpus > 0) throw new RunSpecError(`gpus: the vm runtime cannot assign GPUs, got ${spec.gpus}`);
    const why = await this.available();
    if (why) throw new RuntimeTransientError(this.name, why);
    await clearVmFiles(spec.workDir);
    const { memoryMiB, cpus } = guestShape(spec);
    const template = await this.template(memoryMiB, cpus);
    // The container's own copy of the disk `run` came from: a checkpoint carries it to another instance.
    const data = join(spec.workDir, 'data.img');
    await copyFile(join(template, 'data.img'), data);
    const machine = { ...this.machine(memoryMiB, cpus), data, serial: ports(spec.workDir) };
    return this.launch(spec.id, spec.workDir, machine, join(template, 'state'), specScript(spec));
  }

  /**
   * The directory of the saved guest of this shape that waits for a spec (state, data.img), made once: a
   * guest booted and saved when its `run` says it waits. Shared by the starts of this process; another
   * process making the same one at once loses the rename and uses the winner's.
   */
  private template(memoryMiB: number, cpus: number): Promise<string> {
    const key = createHash('sha256')
      .update(JSON.stringify([this.build(), GUEST_RUN, memoryMiB, cpus, this.accel, this.qemu]))
      .digest('hex')
      .slice(0, 16);
    const root = this.opts.templateDir ?? join(tmpdir(), 'berth-vm-templates');
    const dir = join(root, `${memoryMiB}m-${cpus}c-${key}`);
    return templates.run(dir, async () => {
      if (existsSync(join(dir, 'state'))) {
        // Its last use: pruneTemplates keeps the recently used ones.
        const now = new Date();
        await utimes(dir, now, now).catch(() => {});
        return dir;
      }
      await mkdir(root, { recursive: true });
      const tmp = await mkdtemp(join(root, '.build-'));
      let vm: Vm | null = null;
      try {
        const disk = join(tmp, 'disk');
        await mkdir(disk);
        await writeFile(join(disk, 'run'), GUEST_RUN, { mode: 0o755 });
        await exec('mkfs.ext4', ['-q', '-F', '-d', disk, join(tmp, 'data.img'), '8M']);
        await rm(disk, { recursive: true });
        const machine = { ...this.machine(memoryMiB, cpus), data: join(tmp, 'data.img'), serial: ports(tmp) };
        vm = await Vm.start(machine, tmp);
        const deadline = Date.now() + (this.opts.bootDeadlineMs ?? 300_000);
        while (!(await readFile(join(tmp, 'console'), 'utf8').catch(() => '')).includes(READY_LINE)) {
          if (vm.child.exitCode !== null || Date.now() > deadline)
            throw new Error(`the template guest did not get ready: ${await consoleTail(tmp)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        await vm.save(join(tmp, 'state'));
        await vm.kill();
        vm = null;
        await rename(tmp, dir).catch(async (err: NodeJS.ErrnoException) => {
          if (!existsSync(join(dir, 'state'))) throw err;
        });
        // A new one (a new shape, or a new guest build, QEMU or `run`): the old ones may be left unused.
        await pruneTemplates(root, Date.now(), dir).catch(() => {});
        return dir;
      } finally {
        await vm?.kill();
        await rm(tmp, { recursive: true, force: true });
      }
    });
  }

  /** The guest image's build.json: two guests from the same one can resume each other's saved state. */
  private build(): string {
    return readFileSync(join(this.guestDir, 'build.json'), 'utf8');
  }

  /** The guest of this shape (its data disk and ports are set by the caller). */
  private machine(memoryMiB: number, cpus: number): VmMachine {
    const { init } = JSON.parse(readFileSync(join(this.guestDir, 'build.json'), 'utf8')) as { init: string };
    return {
      kernel: join(this.guestDir, 'vmlinuz'),
      initrd: join(this.guestDir, 'initrd.img'),
      rootfs: join(this.guestDir, 'rootfs.img'),
      append: guestKernelArgs(init, 'quiet 8250.nr_uarts=4'),
      memoryMiB,
      cpus,
      accel: this.accel,
      qemu: this.qemu,
    };
  }

  /**
   * Starts QEMU for `machine` in `workDir` inside the container's host cgroup (with `incoming`, resumes
   * that saved state), records it in run.json, and resolves once the guest's command runs.
   */
  private async launch(
    id: string,
    workDir: string,
    machine: VmMachine,
    incoming: string | null,
    spec: string | null,
  ): Promise<VmHandle> {
    const host = await probeCgroups(this.opts.cgroupRoot ?? CGROUP_ROOT);
    let cgroup: Cgroup | null = null;
    let warning: string | null = null;
    if (host.unusable !== null) {
      warning = `vm runtime: ${host.unusable}; the QEMU process runs without host limits (the guest's hold)`;
    } else {
      cgroup = containerCgroup(host, id, this.opts.cgroupParent);
      await cgroup.create({ vcpus: machine.cpus, ram: (machine.memoryMiB + QEMU_OVERHEAD_MIB) * MiB });
    }
    const procs = cgroup ? cgroup.procsFiles() : [];
    const args = [
      ...qemuArgs(machine, join(workDir, 'qmp.sock'), incoming),
      '-pidfile',
      join(workDir, 'qemu.pid'),
    ];
    const startedAt = Date.now();
    // QEMU's own messages go to a file: a pipe to the agent would break when the agent dies.
    const log = await open(join(workDir, 'qemu.log'), 'a');
    // A detached shell joins the group, then becomes QEMU: the guest is never outside its limits, and it
    // outlives the agent (a new agent re-attaches through run.json).
    const child = spawn(
      '/bin/sh',
      [
        '-c',
        'for f in $1; do echo $$ >"$f" || exit 125; done; shift; exec "$@"',
        'berth-vm',
        procs.join(' '),
        machine.qemu ?? 'qemu-system-x86_64',
        ...args,
      ],
      { detached: true, stdio: ['ignore', 'ignore', log.fd], cwd: workDir },
    );
    const pid = await new Promise<number>((resolve, reject) => {
      child.once('spawn', () => resolve(child.pid!));
      child.once('error', reject);
    }).finally(() => log.close());
    child.unref();
    const ref = (await processRef(pid)) ?? { pid, startTicks: -1 };
    const state: RunState = {
      runtime: this.name,
      id,
      shim: ref,
      startedAt,
      cgroup: cgroup?.path ?? null,
      warning,
      extra: { machine: JSON.stringify(machine), build: guestBuildKey(this.build()) },
    };
    await writeRunState(workDir, state);
    const handle = new VmHandle(state, workDir, cgroup, child);
    try {
      if (incoming) await resumeIncoming(await handle.qmp(), this.opts.bootDeadlineMs ?? 300_000);
      if (spec) handle.sendSpec(spec);
      await handle.booted(this.opts.bootDeadlineMs ?? 300_000);
      // The container's run time starts with its command, not with the guest's boot.
      state.startedAt = Date.now();
      await writeRunState(workDir, state);
    } catch (err) {
      await handle.signal('SIGKILL');
      await handle.wait();
      const qemuLog = (await readFile(join(workDir, 'qemu.log'), 'utf8').catch(() => '')).trim();
      throw new RuntimeTransientError(
        this.name,
        `${(err as Error).message}${qemuLog ? `; qemu: ${qemuLog.slice(-1000)}` : ''}`,
      );
    }
    return handle;
  }

  /**
   * Resumes a guest checkpointed to `dir` (VmHandle.checkpoint) as `spec`'s container, in its work dir: the
   * same machine shape on this instance's own guest image (which must be the same build), its ports wired
   * to the new work dir. Resolves once it runs on. Throws, starting nothing, on a checkpoint it cannot
   * resume, and on one whose shape is not the one `spec` asks for: the guest's memory and the limits inside
   * it are in the saved state, so a request changed since the save (grown by ram_retry_factor) starts afresh.
   */
  async restore(spec: RunSpec, dir: string): Promise<VmHandle> {
    validateSpec(spec);
    const { id, workDir } = spec;
    const why = await this.available();
    if (why) throw new RuntimeTransientError(this.name, why);
    const shape = await machineRecord(dir);
    const asked = guestShape(spec);
    if (shape.memoryMiB !== asked.memoryMiB || shape.cpus !== asked.cpus)
      throw new RunSpecError(
        `checkpoint: saved as a guest of ${shape.memoryMiB} MiB and ${shape.cpus} CPUs, this attempt's request makes one of ${asked.memoryMiB} MiB and ${asked.cpus} CPUs`,
      );
    const here = guestBuildKey(this.build());
    if (shape.build !== here)
      throw new RunSpecError(
        `checkpoint: a guest of build ${shape.build} cannot resume on this instance's guest image (build ${here})`,
      );
    if (shape.accel !== this.accel)
      throw new RunSpecError(
        `checkpoint: saved under accel ${shape.accel}, this instance runs ${this.accel}`,
      );
    await clearVmFiles(workDir);
    const data = join(workDir, 'data.img');
    await copyFile(join(dir, 'data.img'), data);
    // Only the shape comes from the checkpoint: the kernel, disks and QEMU are this instance's own.
    const machine = { ...this.machine(shape.memoryMiB, shape.cpus), data, serial: ports(workDir) };
    return this.launch(id, workDir, machine, join(dir, 'state'), null);
  }

  async reattach(id: string, workDir: string): Promise<VmHandle | null> {
    const state = await readRunState(workDir);
    if (!state || state.runtime !== this.name || state.id !== id) return null;
    const host = await probeCgroups(this.opts.cgroupRoot ?? CGROUP_ROOT);
    const cgroup = state.cgroup && host.unusable === null ? cgroupAt(host, state.cgroup) : null;
    return new VmHandle(state, workDir, cgroup);
  }

  async discard(id: string, workDir: string): Promise<void> {
    // QEMU wrote its pid file; it is ours when its command line names this work dir.
    const pid = Number((await readFile(join(workDir, 'qemu.pid'), 'utf8').catch(() => '')).trim());
    if (pid > 0) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (cmdline.includes(join(workDir, 'qmp.sock'))) killQuietly(pid);
    }
    const host = await probeCgroups(this.opts.cgroupRoot ?? CGROUP_ROOT);
    if (host.unusable === null) await killCgroup(containerCgroup(host, id, this.opts.cgroupParent));
  }
}

/** How many saved templates (~90 MiB each) a template dir keeps: the most recently used ones. */
export const TEMPLATES_KEPT = 8;
/** A template unused this long is removed (another guest build's, a shape no longer asked for). */
export const TEMPLATE_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
/** A half-made template (`.build-*`) this old was left by a process that died making it. */
const TEMPLATE_BUILD_MAX_AGE_MS = 3600 * 1000;

/**
 * Removes from the template dir `root` the templates unused for TEMPLATE_MAX_AGE_MS (their directory's
 * mtime is their last use), those beyond the TEMPLATES_KEPT most recently used, and half-made ones over an
 * hour old; never `keep` (the one just made). Returns the names removed.
 */
export async function pruneTemplates(root: string, now: number, keep?: string): Promise<string[]> {
  const found: { name: string; at: number }[] = [];
  for (const name of await readdir(root).catch(() => [] as string[])) {
    const st = await stat(join(root, name)).catch(() => null);
    if (st?.isDirectory()) found.push({ name, at: st.mtimeMs });
  }
  const made = found.filter((t) => !t.name.startsWith('.')).sort((a, b) => b.at - a.at);
  const gone = [
    ...found.filter((t) => t.name.startsWith('.build-') && now - t.at > TEMPLATE_BUILD_MAX_AGE_MS),
    ...made.filter((t, i) => i >= TEMPLATES_KEPT || now - t.at > TEMPLATE_MAX_AGE_MS),
  ].filter((t) => join(root, t.name) !== keep);
  for (const t of gone) await rm(join(root, t.name), { recursive: true, force: true });
  return gone.map((t) => t.name);
}

/** The guest a container of `spec` runs in: its memory (the request's and the guest's own) and CPUs. */
function guestShape(spec: RunSpec): { memoryMiB: number; cpus: number } {
  return { memoryMiB: Math.ceil(spec.ram / MiB) + GUEST_OVERHEAD_MIB, cpus: Math.ceil(spec.vcpus) };
}

/** A short digest of a guest image's build.json (saved with a checkpoint, checked at its restore). */
function guestBuildKey(build: string): string {
  return createHash('sha256').update(build).digest('hex').slice(0, 16);
}

/** What a vm checkpoint's machine.json holds: the machine's shape, and the guest build it ran. */
export interface MachineRecord {
  memoryMiB: number;
  cpus: number;
  accel: VmAccel;
  build: string;
}

/** An integer 1..max (a machine.json size). */
const upTo = (max: number): FieldRule => [
  (v) => Number.isInteger(v) && (v as number) > 0 && (v as number) <= max,
  `an integer 1..${max}`,
];

/** The machine a checkpoint's machine.json in `dir` describes, checked; throws a RunSpecError naming the field. */
export function machineRecord(dir: string): Promise<MachineRecord> {
  return readCheckpointRecord<MachineRecord>(dir, 'machine.json', 'vm', {
    accel: [(v) => (VM_ACCELS as readonly unknown[]).includes(v), VM_ACCELS.join(' or ')],
    build: [(v) => typeof v === 'string' && /^[0-9a-f]{16}$/.test(v), "the guest build's digest"],
    memoryMiB: upTo(1024 * 1024),
    cpus: upTo(1024),
  });
}

/** spec.sh: the command, environment, working directory and limits as shell words. */
function specScript(spec: RunSpec): string {
  const env = { PATH: GUEST_PATH, HOME: GUEST_SCRATCH, TMPDIR: GUEST_SCRATCH, ...spec.env };
  const argv = ['env', '-i', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...spec.command];
  return [
    `ram=${spec.ram}`,
    `cpu_max='${Math.max(1000, Math.round(spec.vcpus * 100_000))} 100000'`,
    `cwd=${shellWord(spec.cwd ?? GUEST_SCRATCH)}`,
    `set -- ${argv.map(shellWord).join(' ')}`,
    '',
  ].join('\n');
}

async function consoleTail(dir: string): Promise<string> {
  const text = await readFile(join(dir, 'console'), 'utf8').catch(() => '');
  return text.replace(/\r/g, '').trim().split('\n').slice(-5).join(' | ');
}

/** Templates being made in this process, by directory. */
const templates = new OncePerKey<string>();

/** The guest's serial ports: console, stdout, stderr (files QEMU appends to), control (a socket). */
function ports(workDir: string): string[] {
  const file = (name: string) => `file,path=${join(workDir, name)},append=on`;
  return [
    file('console'),
    file('stdout'),
    file('stderr'),
    `socket,path=${join(workDir, 'ctl.sock')},server=on,wait=off`,
  ];
}

async function clearVmFiles(workDir: string): Promise<void> {
  await clearRunFiles(workDir);
  for (const f of VM_FILES) await rm(join(workDir, f), { force: true });
}

async function onPath(cmd: string): Promise<boolean> {
  if (cmd.includes('/')) return existsSync(cmd);
  return (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, cmd)));
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** The latest usage line of the guest ("u CPU_USEC CURRENT PEAK SCRATCH_KIB"). */
interface GuestSample {
  cpuSeconds: number;
  ramBytes: number;
  peakRamBytes: number;
  scratchBytes: number;
}

/**
 * The connections to one guest in this process (QEMU serves one QMP and one control client at a time, and
 * an agent may hold several handles of one container).
 */
class GuestLink {
  private qmpConn: Promise<Qmp> | null = null;
  private ctl: Socket | null = null;
  sample: GuestSample | null = null;
  /** Lines seen on the control port since this link connected. */
  lines = 0;

  constructor(
    private readonly workDir: string,
    private readonly alive: () => Promise<boolean>,
  ) {}

  qmp(deadlineMs = 30_000): Promise<Qmp> {
    this.qmpConn ??= (async () => {
      let dead: string | null = null;
      const watch = setInterval(() => void this.alive().then((a) => (dead = a ? null : 'qemu exited')), 100);
      try {
        return await Qmp.connect(join(this.workDir, 'qmp.sock'), deadlineMs, () => dead);
      } finally {
        clearInterval(watch);
      }
    })().catch((err: unknown) => {
      this.qmpConn = null;
      throw err;
    });
    return this.qmpConn;
  }

  /** Connects the control port (again, after QEMU dropped it); a no-op while connected. */
  connectCtl(): void {
    if (this.ctl) return;
    const path = join(this.workDir, 'ctl.sock');
    if (!existsSync(path)) return;
    const sock = connect(path);
    this.ctl = sock;
    let buf = '';
    sock.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const m = /^u (\d+) (\d+) (\d+) (\d+)\r?$/.exec(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        this.lines += 1;
        if (m)
          this.sample = {
            cpuSeconds: Number(m[1]) / 1e6,
            ramBytes: Number(m[2]),
            peakRamBytes: Number(m[3]),
            scratchBytes: Number(m[4]) * 1024,
          };
      }
    });
    sock.on('error', () => undefined);
    sock.on('close', () => {
      if (this.ctl === sock) this.ctl = null;
    });
    sock.unref();
  }

  send(line: string): void {
    this.ctl?.write(`${line}\n`);
  }

  close(): void {
    this.ctl?.destroy();
    this.ctl = null;
    void this.qmpConn?.then(
      (q) => q.close(),
      () => undefined,
    );
    this.qmpConn = null;
  }
}

const links = new Map<string, GuestLink>();

/** A container in a QEMU guest: the same code serves a fresh start and a re-attach. */
export class VmHandle implements RunHandle {
  readonly id: string;
  readonly runtime: string;
  readonly warning: string | null;
  private waiting: Promise<ExitInfo> | null = null;
  private readonly exited: Promise<void> | null;
  private done = false;
  /** Stopped by freeze() (a signal then thaws it). */
  private frozen = false;

  constructor(
    private readonly state: RunState,
    private readonly workDir: string,
    private readonly cgroup: Cgroup | null,
    child?: ChildProcess,
  ) {
    this.id = state.id;
    this.runtime = state.runtime;
    this.warning = state.warning;
    this.exited = child
      ? new Promise((r) =>
          child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r()),
        )
      : null;
  }

  private get link(): GuestLink {
    let l = links.get(this.workDir);
    if (!l) {
      l = new GuestLink(this.workDir, () => this.running());
      links.set(this.workDir, l);
    }
    return l;
  }

  /** True while QEMU runs. */
  private running(): Promise<boolean> {
    return isAlive(this.state.shim);
  }

  qmp(): Promise<Qmp> {
    return this.link.qmp();
  }

  /** Sends the guest waiting in `run` its spec.sh. */
  sendSpec(script: string): void {
    this.link.connectCtl();
    const b64 =
      Buffer.from(script)
        .toString('base64')
        .match(/.{1,76}/g) ?? [];
    this.link.send([...b64, '.'].join('\n'));
  }

  /** Resolves once the guest's `run` speaks on the control port (its command then runs). */
  async booted(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      this.link.connectCtl();
      if (this.link.lines > 0) return;
      if (!(await this.running()))
        throw new Error(`the guest ended before its command started: ${await this.consoleTail()}`);
      if (Date.now() > until)
        throw new Error(
          `the guest did not start the command in ${deadlineMs} ms: ${await this.consoleTail()}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private consoleTail(): Promise<string> {
    return consoleTail(this.workDir);
  }

  wait(): Promise<ExitInfo> {
    this.waiting ??= collectOnce(this.workDir, () => this.collect()).then((info) => {
      this.done = true;
      return info;
    });
    return this.waiting;
  }

  private async collect(): Promise<ExitInfo> {
    await pollUntilEnded(
      async () => !(await this.running()),
      () => this.exited,
    );
    const wallMs = Math.max(0, Date.now() - this.state.startedAt);
    const consoleText = (await readFile(join(this.workDir, 'console'), 'utf8').catch(() => '')).replace(
      /\r/g,
      '',
    );
    const m = EXIT_LINE.exec(consoleText);
    const killed = existsSync(join(this.workDir, 'killed'));
    const moved = await readFile(join(this.workDir, MOVED_FILE), 'utf8').catch(() => null);
    const last = this.link.sample;
    links.get(this.workDir)?.close();
    links.delete(this.workDir);
    if (this.cgroup) await killCgroup(this.cgroup);
    for (const f of ['data.img', 'qmp.sock', 'ctl.sock']) await rm(join(this.workDir, f), { force: true });
    const exitCode = m ? Number(m[1]) : killed ? 137 : null;
    const info: ExitInfo = {
      exitCode,
      oomKilled: m ? Number(m[2]) > 0 : false,
      peakRamBytes: m ? Number(m[3]) : (last?.peakRamBytes ?? 0),
      cpuSeconds: m ? Number(m[4]) / 1e6 : (last?.cpuSeconds ?? 0),
      wallMs,
    };
    const signal = signalOf(exitCode);
    if (signal) info.signal = signal;
    if (moved !== null) info.reason = `checkpointed to ${moved}`;
    else if (exitCode === null)
      info.reason = `the vm ended without reporting an exit code: ${consoleText.trim().split('\n').slice(-3).join(' | ')}`;
    if (exitCode !== null) await writeFile(join(this.workDir, 'exit'), `${exitCode}\n`);
    await saveResult(this.workDir, info);
    this.done = true;
    return info;
  }

  async signal(sig: NodeJS.Signals): Promise<void> {
    if (this.done || !(await this.running())) return;
    if (sig === 'SIGKILL') {
      // Everything of the container is in the guest: ending QEMU kills it all at once.
      await writeFile(join(this.workDir, 'killed'), '');
      killQuietly(this.state.shim.pid);
      return;
    }
    await this.booted(30_000).catch(() => undefined);
    this.link.send(`sig ${sig.replace(/^SIG/, '')}`);
    if (this.frozen) await this.thaw();
  }

  async freeze(): Promise<void> {
    if (this.done || !(await this.running())) return;
    const qmp = await this.link.qmp();
    await qmp.command('stop');
    this.frozen = true;
    // QEMU wrote whatever the guest sent before the stop into the control socket before answering: one
    // pass of the event loop's poll phase reads it, so that usage() shows the guest's last sample.
    await new Promise((r) => setTimeout(r, 0));
    await new Promise((r) => setImmediate(r));
  }

  async thaw(): Promise<void> {
    if (this.done || !(await this.running())) return;
    await (await this.link.qmp()).command('cont');
    this.frozen = false;
  }

  /**
   * Saves the whole guest to `dir` (its state, its data disk, its machine) and ends this QEMU; wait() then
   * reports no exit code and the reason "checkpointed to DIR". VmRuntime.restore resumes it.
   */
  async checkpoint(dir: string): Promise<{ ms: number; bytes: number }> {
    await mkdir(dir, { recursive: true });
    const saved = await saveVm(await this.link.qmp(), join(dir, 'state'));
    await copyFile(join(this.workDir, 'data.img'), join(dir, 'data.img'));
    const machine = JSON.parse(this.state.extra.machine!) as VmMachine;
    await writeFile(
      join(dir, 'machine.json'),
      JSON.stringify({ ...machine, build: this.state.extra.build ?? null }),
    );
    await writeFile(join(this.workDir, MOVED_FILE), dir);
    killQuietly(this.state.shim.pid);
    return saved;
  }

  async usage(): Promise<Usage> {
    const outputBytes = await outputDiskUsage(this.workDir);
    if (this.done) return { cpuSeconds: 0, ramBytes: 0, peakRamBytes: 0, scratchBytes: 0, outputBytes };
    this.link.connectCtl();
    const s = this.link.sample;
    return {
      cpuSeconds: s?.cpuSeconds ?? 0,
      ramBytes: s?.ramBytes ?? 0,
      peakRamBytes: s?.peakRamBytes ?? 0,
      scratchBytes: s?.scratchBytes ?? 0,
      outputBytes,
    };
  }

  output(): AsyncIterable<OutputChunk> {
    return tailFiles(
      { stdout: join(this.workDir, 'stdout'), stderr: join(this.workDir, 'stderr') },
      async () => !(await this.running()),
    );
  }
}
