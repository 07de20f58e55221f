// A node's memory of a passed sandbox probe, so that a one-shot agent (one per SLURM job) does not run a
// bubblewrap sandbox before every container only to learn what the last job learned. The file records the
// key of a probe that passed: what decides whether bwrap can build a sandbox here (the bwrap and setpriv
// binaries' path, size, mtime and inode, the kernel release, the agent's uid, the sysctls that allow or
// refuse user namespaces). The key is always recomputed from the machine; the file only says "this key
// passed". A different key, an unreadable or corrupt file: probe again (and rewrite the file). A failed
// probe is never recorded: its reason is reported, and the next agent probes again.
import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { release } from 'node:os';

/** Sysctls that decide whether an unprivileged user may create the namespaces bwrap needs. */
const USERNS_SYSCTLS = [
  '/proc/sys/kernel/unprivileged_userns_clone',
  '/proc/sys/user/max_user_namespaces',
  '/proc/sys/kernel/apparmor_restrict_unprivileged_userns',
];

/** The file's format version: a file of another version is a stale key. */
const VERSION = 1;

/** What decides the sandbox probe's outcome on this machine, for these binaries, as one string. */
export async function sandboxProbeKey(binaries: readonly (string | null)[]): Promise<string> {
  const files = await binaryKeys(binaries);
  const sysctls = await Promise.all(
    USERNS_SYSCTLS.map((p) =>
      readFile(p, 'utf8').then(
        (v) => v.trim(),
        () => null,
      ),
    ),
  );
  return JSON.stringify({ v: VERSION, files, kernel: release(), uid: process.getuid?.() ?? null, sysctls });
}

/**
 * What decides `criu check`'s outcome and whether its dumps serve a runtime here: the criu binary, the
 * kernel release and `scope`, the runtime's own say (the process sandbox setting: CRIU dumps only
 * unsandboxed containers; `runc` for the runc runtime's, remembered in a file of its own).
 */
export async function criuProbeKey(criu: string, scope: string): Promise<string> {
  return JSON.stringify({ v: VERSION, criu: await binaryKeys([criu]), kernel: release(), sandbox: scope });
}

/** Each binary's path, size, mtime and inode (a replaced or upgraded binary changes the key). */
function binaryKeys(binaries: readonly (string | null)[]): Promise<((string | number)[] | null)[]> {
  return Promise.all(
    binaries.map(async (path) => {
      if (path === null) return null;
      const s = await stat(path);
      return [path, s.size, s.mtimeMs, s.ino];
    }),
  );
}

/** True when `file` records a passed probe with exactly this key; anything else (missing, corrupt) false. */
export async function probePassed(file: string, key: string): Promise<boolean> {
  try {
    const rec: unknown = JSON.parse(await readFile(file, 'utf8'));
    return typeof rec === 'object' && rec !== null && (rec as { passed?: unknown }).passed === key;
  } catch {
    return false;
  }
}

/** Records that the probe passed with this key (0600, written whole then renamed: never half a file). */
export async function recordPassed(file: string, key: string): Promise<void> {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify({ passed: key })}\n`, { mode: 0o600 });
    await rename(tmp, file);
  } finally {
    await rm(tmp, { force: true });
  }
}
