// The save/restore mechanism of the planned `vm` runtime (issue 16 item 3, docs/RUNTIMES.md): a small
// QEMU guest (KVM where the host has it, software emulation otherwise) whose whole state is saved to a
// file through QMP (`stop`, then `migrate` to "exec:cat > FILE") and resumed by another QEMU process started
// with the same machine and `-incoming "exec:cat FILE"` (then `cont`): its processes continue where they
// stood. The file can be moved to another instance in between. The runtime around it (RunSpec → guest,
// output, exit, usage, limits) is not written yet.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

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
  accel: 'kvm' | 'tcg';
  qemu?: string;
}

/** The QEMU arguments of `m` (a pure function: the two sides of a restore must agree). */
export function qemuArgs(m: VmMachine, qmpSocket: string, incomingFile: string | null): string[] {
  const drives = ['-drive', `file=${m.rootfs},format=raw,if=virtio`];
  if (m.data) drives.push('-drive', `file=${m.data},format=raw,if=virtio,readonly=on`);
  return [
    ...['-accel', m.accel, '-machine', 'q35', '-m', String(m.memoryMiB), '-smp', String(m.cpus)],
    ...['-nographic', '-no-reboot', '-snapshot', '-nic', 'none'],
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

/** A running QEMU process, its console lines and its QMP socket. */
export class Vm {
  readonly lines: string[] = [];
  private qmpSock: Socket | null = null;
  private replies: ((r: QmpReply) => void)[] = [];
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
      await vm.connectQmp(opts.deadlineMs ?? 30_000);
    } catch (err) {
      await vm.kill();
      throw err;
    }
    return vm;
  }

  private async connectQmp(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(`qemu exited: ${this.lines.slice(-5).join(' | ')}`);
      if (existsSync(this.socketPath)) {
        const ok = await new Promise<Socket | null>((resolve) => {
          const s = connect(this.socketPath);
          s.once('connect', () => resolve(s));
          s.once('error', () => resolve(null));
        });
        if (ok) {
          this.qmpSock = ok;
          const greeting = new Promise<QmpReply>((r) => this.replies.push(r));
          createInterface({ input: ok }).on('line', (line) => {
            const msg = JSON.parse(line) as QmpReply;
            if (msg.event) return;
            this.replies.shift()?.(msg);
          });
          await greeting;
          await this.qmp('qmp_capabilities');
          return;
        }
      }
      if (Date.now() > until) throw new Error(`no QMP socket after ${deadlineMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Runs a QMP command; throws its error. */
  async qmp(execute: string, args?: Record<string, unknown>): Promise<unknown> {
    if (!this.qmpSock) throw new Error('QMP not connected');
    const reply = new Promise<QmpReply>((r) => this.replies.push(r));
    this.qmpSock.write(`${JSON.stringify(args ? { execute, arguments: args } : { execute })}\n`);
    const r = await reply;
    if (r.error) throw new Error(`QMP ${execute}: ${r.error.class}: ${r.error.desc}`);
    return r.return;
  }

  /** Stops the guest and saves its whole state to `file`; the guest stays stopped. */
  async save(file: string, deadlineMs = 120_000): Promise<{ ms: number; bytes: number }> {
    const t0 = performance.now();
    await this.qmp('stop');
    await this.qmp('migrate', { uri: `exec:cat > ${shellQuote(file)}` });
    const until = Date.now() + deadlineMs;
    for (let step = 2; ; step = Math.min(step * 2, 50)) {
      const s = (await this.qmp('query-migrate')) as { status?: string; 'error-desc'?: string };
      if (s.status === 'completed') break;
      if (s.status === 'failed' || s.status === 'cancelled')
        throw new Error(`migration ${s.status}: ${s['error-desc'] ?? ''}`);
      if (Date.now() > until) throw new Error(`the save did not complete in ${deadlineMs} ms`);
      await new Promise((r) => setTimeout(r, step));
    }
    return { ms: performance.now() - t0, bytes: (await stat(file)).size };
  }

  /** On the restoring side: waits until the saved state is loaded, then lets the guest run on. */
  async resumeIncoming(deadlineMs = 120_000): Promise<number> {
    const t0 = performance.now();
    const until = Date.now() + deadlineMs;
    for (let step = 2; ; step = Math.min(step * 2, 50)) {
      const s = (await this.qmp('query-status')) as { status: string };
      if (s.status !== 'inmigrate') break;
      if (Date.now() > until) throw new Error(`the saved state was not loaded in ${deadlineMs} ms`);
      await new Promise((r) => setTimeout(r, step));
    }
    await this.qmp('cont');
    return performance.now() - t0;
  }

  /** Kills QEMU (its whole process group) and waits for it. */
  async kill(): Promise<void> {
    this.qmpSock?.destroy();
    try {
      process.kill(-this.child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await this.exited;
  }
}
