// The save/restore mechanism of the `vm` runtime (vm.ts; issue 16 item 3, docs/RUNTIMES.md): a small
// QEMU guest (KVM where the host has it, software emulation otherwise) whose whole state is saved to a
// file through QMP (`stop`, then `migrate` to "exec:cat > FILE") and resumed by another QEMU process started
// with the same machine and `-incoming "exec:cat FILE"` (then `cont`): its processes continue where they
// stood. The file can be moved to another instance in between.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** How QEMU runs the guest: software emulation, or KVM where /dev/kvm runs guests. */
export const VM_ACCELS = ['tcg', 'kvm'] as const;
export type VmAccel = (typeof VM_ACCELS)[number];

/** TCG's translated-code cache (QEMU's own memory: vm.ts counts it in the QEMU process's limit). */
export const TCG_CACHE_MIB = 256;

/**
 * The guest kernel's command line, for every guest Berth and its tests boot: `init` and what else a caller adds.
 * `no_timer_check`: at boot the kernel checks that the timer interrupt arrives through the IO-APIC within a few
 * ticks and panics when it does not ("IO-APIC + timer doesn't work!", in `apic_intr_mode_init`). Under software
 * emulation on a loaded host the emulated CPU can miss that window: it did in CI at load average ~20, and the
 * template guest never got ready. On a virtual machine the check proves nothing, so it is skipped.
 */
export function guestKernelArgs(init: string, extra = ''): string {
  return `console=ttyS0 panic=-1 no_timer_check root=/dev/vda init=${init} ${extra}`.trim();
}

/** The machine: the same on the saving and the restoring side (QEMU requires it). */
export interface VmMachine {
  kernel: string;
  initrd: string;
  /** The root disk (read-only for the guest: -snapshot). */
  rootfs: string;
  /** A second disk, read-only (the container's files), when given. */
  data?: string;
  append: string;
  memoryMiB: number;
  cpus: number;
  /** "kvm" where /dev/kvm runs guests, else "tcg". */
  accel: VmAccel;
  qemu?: string;
  /**
   * The guest's serial ports ttyS0..ttyS3 as QEMU chardev options (`file,path=...,append=on`), instead of
   * the console on QEMU's stdout (-nographic). The chardev paths may differ between the two sides.
   */
  serial?: string[];
}

/** The QEMU arguments of `m` (a pure function: the two sides of a restore must agree). */
export function qemuArgs(m: VmMachine, qmpSocket: string, incomingFile: string | null): string[] {
  const drives = ['-drive', `file=${m.rootfs},format=raw,if=virtio`];
  if (m.data) drives.push('-drive', `file=${m.data},format=raw,if=virtio,readonly=on`);
  return [
    // TCG's translated-code cache is 1 GiB by default, memory QEMU touches as the guest runs new code.
    ...['-accel', m.accel === 'tcg' ? `tcg,tb-size=${TCG_CACHE_MIB}` : m.accel],
    ...['-machine', 'q35', '-m', String(m.memoryMiB), '-smp', String(m.cpus)],
    ...(m.serial ? ['-display', 'none', '-monitor', 'none', '-parallel', 'none'] : ['-nographic']),
    ...(m.serial ?? []).flatMap((c, i) => ['-chardev', `${c},id=ttyS${i}`, '-serial', `chardev:ttyS${i}`]),
    ...['-no-reboot', '-snapshot', '-nic', 'none'],
    ...['-kernel', m.kernel, '-initrd', m.initrd, ...drives, '-append', m.append],
    ...['-qmp', `unix:${qmpSocket},server=on,wait=off`],
    // The restoring side waits paused for the state, and runs on `cont`.
    ...(incomingFile ? ['-S', '-incoming', `exec:cat ${shellQuote(incomingFile)}`] : []),
  ];
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

type QmpReply = { return?: unknown; error?: { class: string; desc: string }; event?: string };

/** A connection to a QEMU's QMP socket (one client at a time: QEMU serves the next once it closes). */
export class Qmp {
  private replies: ((r: QmpReply) => void)[] = [];
  private closed = false;

  private constructor(private readonly sock: Socket) {
    createInterface({ input: sock }).on('line', (line) => {
      const msg = JSON.parse(line) as QmpReply;
      if (msg.event) return;
      this.replies.shift()?.(msg);
    });
    // QEMU ending resets the connection: the close below answers what waits.
    sock.on('error', () => undefined);
    sock.once('close', () => {
      this.closed = true;
      for (const r of this.replies.splice(0))
        r({ error: { class: 'Closed', desc: 'QMP connection closed' } });
    });
  }

  /** Connects once the socket answers; gives up when `alive()` says QEMU is gone or after `deadlineMs`. */
  static async connect(path: string, deadlineMs: number, alive: () => string | null): Promise<Qmp> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      const dead = alive();
      if (dead) throw new Error(dead);
      if (existsSync(path)) {
        const sock = await new Promise<Socket | null>((resolve) => {
          const s = connect(path);
          s.once('connect', () => resolve(s));
          s.once('error', () => resolve(null));
        });
        if (sock) {
          const qmp = new Qmp(sock);
          const greeting = new Promise<QmpReply>((r) => qmp.replies.push(r));
          if (!(await greeting).error) {
            await qmp.command('qmp_capabilities');
            return qmp;
          }
        }
      }
      if (Date.now() > until) throw new Error(`no QMP socket after ${deadlineMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Runs a QMP command; throws its error. */
  async command(execute: string, args?: Record<string, unknown>): Promise<unknown> {
    if (this.closed) throw new Error(`QMP ${execute}: connection closed`);
    const reply = new Promise<QmpReply>((r) => this.replies.push(r));
    this.sock.write(`${JSON.stringify(args ? { execute, arguments: args } : { execute })}\n`);
    const r = await reply;
    if (r.error) throw new Error(`QMP ${execute}: ${r.error.class}: ${r.error.desc}`);
    return r.return;
  }

  close(): void {
    this.sock.destroy();
  }
}

/** Stops the guest and saves its whole state to `file`; the guest stays stopped. */
export async function saveVm(
  qmp: Qmp,
  file: string,
  deadlineMs = 120_000,
): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  await qmp.command('stop');
  await qmp.command('migrate', { uri: `exec:cat > ${shellQuote(file)}` });
  const until = Date.now() + deadlineMs;
  for (let step = 2; ; step = Math.min(step * 2, 50)) {
    const s = (await qmp.command('query-migrate')) as { status?: string; 'error-desc'?: string };
    if (s.status === 'completed') break;
    if (s.status === 'failed' || s.status === 'cancelled')
      throw new Error(`migration ${s.status}: ${s['error-desc'] ?? ''}`);
    if (Date.now() > until) throw new Error(`the save did not complete in ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, step));
  }
  return { ms: performance.now() - t0, bytes: (await stat(file)).size };
}

/** On the restoring side: waits until the saved state is loaded, then lets the guest run on. */
export async function resumeIncoming(qmp: Qmp, deadlineMs = 120_000): Promise<number> {
  const t0 = performance.now();
  const until = Date.now() + deadlineMs;
  for (let step = 2; ; step = Math.min(step * 2, 50)) {
    const s = (await qmp.command('query-status')) as { status: string };
    if (s.status !== 'inmigrate') break;
    if (Date.now() > until) throw new Error(`the saved state was not loaded in ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, step));
  }
  await qmp.command('cont');
  return performance.now() - t0;
}

/** A running QEMU process, its console lines and its QMP socket. */
export class Vm {
  readonly lines: string[] = [];
  private conn: Qmp | null = null;
  readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    private readonly socketPath: string,
    onLine?: (line: string) => void,
  ) {
    const take = (line: string) => {
      // eslint-disable-next-line no-control-regex
      const clean = line.replace(/\r/g, '').replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
      this.lines.push(clean);
      onLine?.(clean);
    };
    createInterface({ input: child.stdout! }).on('line', take);
    createInterface({ input: child.stderr! }).on('line', (l) => take(`qemu: ${l}`));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /**
   * Starts QEMU for `m` with its QMP socket in `dir`; with `incomingFile`, it waits paused for that saved
   * state. Resolves once QMP answers.
   */
  static async start(
    m: VmMachine,
    dir: string,
    opts: { incomingFile?: string; onLine?: (line: string) => void; deadlineMs?: number } = {},
  ): Promise<Vm> {
    const sock = join(dir, `qmp-${process.pid}-${Date.now()}.sock`);
    // Its own process group, and a parent-death signal: QEMU never outlives the agent that started it.
    const child = spawn(
      'setpriv',
      [
        '--pdeathsig',
        'KILL',
        '--',
        m.qemu ?? 'qemu-system-x86_64',
        ...qemuArgs(m, sock, opts.incomingFile ?? null),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    const vm = new Vm(child, sock, opts.onLine);
    try {
      vm.conn = await Qmp.connect(sock, opts.deadlineMs ?? 30_000, () =>
        child.exitCode !== null || child.signalCode !== null
          ? `qemu exited: ${vm.lines.slice(-5).join(' | ')}`
          : null,
      );
    } catch (err) {
      await vm.kill();
      throw err;
    }
    return vm;
  }

  /** Runs a QMP command; throws its error. */
  async qmp(execute: string, args?: Record<string, unknown>): Promise<unknown> {
    return this.requireQmp().command(execute, args);
  }

  /** Stops the guest and saves its whole state to `file`; the guest stays stopped. */
  save(file: string, deadlineMs = 120_000): Promise<{ ms: number; bytes: number }> {
    return saveVm(this.requireQmp(), file, deadlineMs);
  }

  /** On the restoring side: waits until the saved state is loaded, then lets the guest run on. */
  resumeIncoming(deadlineMs = 120_000): Promise<number> {
    return resumeIncoming(this.requireQmp(), deadlineMs);
  }

  private requireQmp(): Qmp {
    if (!this.conn) throw new Error('QMP not connected');
    return this.conn;
  }

  /** Kills QEMU (its whole process group) and waits for it. */
  async kill(): Promise<void> {
    this.conn?.close();
    try {
      process.kill(-this.child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await this.exited;
  }
}
