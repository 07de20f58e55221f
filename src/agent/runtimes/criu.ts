// CRIU (process checkpoint/restore) for plain containers, where `criu check` passes (issue 16 item 3).
// Detection only: Debian 12's CRIU 3.17 fails `criu check` on the 6.x kernels of our machines (the vDSO
// layout of kernels 6.13+, fixed upstream in newer CRIU), so checkpoints here are the vm runtime's and the
// application's own (docs/RUNTIMES.md).
import { execFile } from 'node:child_process';

/** Why CRIU cannot checkpoint here (the first error line of `criu check`), or null when it can. */
export function criuUnusable(criu = 'criu', timeoutMs = 20_000): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(criu, ['check'], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (!err) return resolve(null);
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return resolve(`${criu} not found`);
      const first = `${stderr}\n${stdout}`
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l !== '');
      resolve(`criu check failed: ${first ?? `exit ${String(err.code ?? err.signal)}`}`);
    });
  });
}
