// The `vm` runtime's save/restore mechanism (src/agent/runtimes/vm-snapshot.ts) on the `test` guest: a
// counter runs in a 256 MiB guest; its whole state is saved to a file, the QEMU process is killed, the file
// is moved to another directory (another instance's), and a new QEMU resumes it: the counter goes on from
// where it stopped instead of starting again. Timings are printed for docs/PERFORMANCE.md, not asserted.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect } from 'vitest';
import { guestKernelArgs, Vm, type VmMachine } from '../../src/agent/runtimes/vm-snapshot.js';
import { findGuest } from '../helpers/guest.js';
import { itIf } from '../helpers/needs.js';
import { until } from '../helpers/cli.js';

const exec = promisify(execFile);
const guest = findGuest('test');
const it = itIf(typeof guest === 'string' ? guest : null);
const vms: Vm[] = [];
let tmp: string | null = null;

afterAll(async () => {
  for (const vm of vms) await vm.kill();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const counts = (lines: string[]) =>
  lines.flatMap((l) => {
    const m = /^count (\d+)$/.exec(l.trim());
    return m ? [Number(m[1])] : [];
  });

describe('vm save/restore (QEMU, software emulation)', () => {
  it('a 256 MiB guest saved to a file, moved and resumed in another QEMU: its counter continues', async () => {
    if (typeof guest === 'string') return;
    tmp = await mkdtemp(join(tmpdir(), 'berth-vm-'));
    const [a, b, data] = [join(tmp, 'instance-a'), join(tmp, 'instance-b'), join(tmp, 'data')];
    for (const d of [a, b, data]) await mkdir(d);
    await writeFile(
      join(data, 'run'),
      '#!/bin/sh\ni=0\nwhile :; do i=$((i+1)); echo "count $i"; sleep 0.05; done\n',
      { mode: 0o755 },
    );
    const img = join(tmp, 'data.img');
    await exec('mkfs.ext4', ['-q', '-F', '-d', data, img, '16M']);
    const machine: VmMachine = {
      kernel: join(guest.dir, 'vmlinuz'),
      initrd: join(guest.dir, 'initrd.img'),
      rootfs: join(guest.dir, 'rootfs.img'),
      data: img,
      append: guestKernelArgs(guest.init, 'quiet'),
      memoryMiB: 256,
      cpus: 1,
      accel: 'tcg',
    };
    const first = await Vm.start(machine, a);
    vms.push(first);
    await until(async () => counts(first.lines).length >= 20, 300_000, 'the counter in the guest');
    const saved = await first.save(join(a, 'state'));
    const before = counts(first.lines);
    const last = before[before.length - 1]!;
    await first.kill();
    // Moved to another instance's directory (on a real move: copied to another host).
    const t0 = performance.now();
    await rename(join(a, 'state'), join(b, 'state'));
    const moveMs = performance.now() - t0;
    const t1 = performance.now();
    const second = await Vm.start(machine, b, { incomingFile: join(b, 'state') });
    vms.push(second);
    const loadMs = await second.resumeIncoming();
    const restoreMs = performance.now() - t1;
    await until(async () => counts(second.lines).length >= 5, 120_000, 'the counter after the restore');
    const after = counts(second.lines);
    // It continues: never back to 1, the first number after the restore follows the last one before.
    expect(after[0]).toBeGreaterThan(last);
    expect(after[0]).toBeLessThanOrEqual(last + 2);
    expect(after).not.toContain(1);
    expect(second.lines.some((l) => l.includes('berth-guest: up at'))).toBe(false);
    console.log(
      `vm save/restore, 256 MiB guest (tcg): save ${saved.ms.toFixed(0)} ms (${(saved.bytes / 1048576).toFixed(1)} MiB), ` +
        `move ${moveMs.toFixed(1)} ms, restore ${restoreMs.toFixed(0)} ms (QEMU start + ${loadMs.toFixed(0)} ms load); ` +
        `count ${last} → ${after[0]}`,
    );
  }, 600_000);
});
