// The runtimes on a real cgroup v2 kernel: boots the `test` guest (Debian's 6.1 kernel, cgroup v2 only,
// built by scripts/guest/build.sh) once under QEMU, runs guest-main.ts inside it (bundled with esbuild
// into one file: node starts ~10× slower under emulation, and vitest would take a minute), and reports
// each case the guest ran as its own test here. The guest has a NIC on QEMU's user network: its CRIU
// migration cases (process, runc) each run two agents against an API server on this host
// (criu-migrate-host.ts), whose checks of the store are that case's too.
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe } from 'vitest';
import { itIf } from '../helpers/needs.js';
import { GUEST_DATA, bootGuest, findGuest, type BootResult } from '../helpers/guest.js';
import { TEST_ROOTFS_TAR, rootfsMissing } from '../agent/helpers.js';
import { CRIU_MIGRATIONS } from './criu-migrate-case.js';
import { startCriuMigrations, type CriuMigrationOutcome, type CriuMigrations } from './criu-migrate-host.js';
import { RESULT_PREFIX, guestPlan, type CaseResult } from './plan.js';

const guest = findGuest('test');
const missing = typeof guest === 'string' ? guest : rootfsMissing();
const it = itIf(missing);
/** The whole guest run: boot, ~20 cases under emulation, power off. Killed (and failed) past this. */
const GUEST_DEADLINE_MS = 10 * 60_000;

/** A migration's line for the report: the host's times, and end to end with the guest's handover. */
function migrationLine(runtime: string, host: CriuMigrationOutcome, guest: CaseResult | undefined): string {
  if (!host.ok) return `criu migration of a ${runtime} container: FAIL`;
  const handover = guest?.ok ? Number(guest.measured?.handoverMs) : NaN;
  return (
    `${host.line}; end to end ${Number.isNaN(handover) ? '?' : handover + host.resumeMs} ms ` +
    `(A's freeze to B's order ${Number.isNaN(handover) ? '?' : handover} ms, then download and restore)`
  );
}

describe('runtimes in a cgroup v2 guest (QEMU)', () => {
  const results = new Map<string, CaseResult>();
  let boot: BootResult | null = null;
  let dataDir: string | null = null;
  let migrations: CriuMigrations | null = null;
  /** Each migration case's host half, by case id. */
  const migrated = new Map<string, CriuMigrationOutcome>();

  beforeAll(async () => {
    if (typeof guest === 'string' || missing) return;
    dataDir = await mkdtemp(join(tmpdir(), 'berth-guest-data-'));
    await build({
      entryPoints: [fileURLToPath(new URL('./guest-main.ts', import.meta.url))],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile: join(dataDir, 'guest-main.mjs'),
      logLevel: 'error',
      // The agent's CommonJS packages (pino) call require(); an ES module has none of its own.
      banner: {
        js: "import { createRequire as __berthRequire } from 'node:module'; const require = __berthRequire(import.meta.url);",
      },
    });
    await copyFile(TEST_ROOTFS_TAR, join(dataDir, basename(TEST_ROOTFS_TAR)));
    await writeFile(
      join(dataDir, 'run'),
      `#!/bin/sh\nexport BERTH_TEST_CACHE=${GUEST_DATA} BERTH_TEST_TIME_SCALE=10\nexec node ${GUEST_DATA}/guest-main.mjs\n`,
      { mode: 0o755 },
    );
    let guestEnded = false;
    migrations = await startCriuMigrations(dataDir, () => guestEnded);
    const t0 = performance.now();
    let firstCaseMs: number | null = null;
    let upMs: number | null = null;
    boot = await bootGuest(guest, {
      dataDir,
      timeoutMs: GUEST_DEADLINE_MS,
      network: true,
      onLine: (line) => {
        if (line.startsWith('berth-guest: up at')) upMs ??= performance.now() - t0;
        const at = line.indexOf(RESULT_PREFIX);
        if (at < 0) return;
        firstCaseMs ??= performance.now() - t0;
        const r = JSON.parse(line.slice(at + RESULT_PREFIX.length)) as CaseResult;
        results.set(r.id, r);
      },
    });
    guestEnded = true;
    for (const kind of CRIU_MIGRATIONS) migrated.set(kind.name, await migrations.outcomes.get(kind.runtime)!);
    // The timings the report asks for: boot to the first result, each case, the whole run.
    console.log(
      `guest: ${Math.round(boot.wallMs)} ms in QEMU; its init ran after ${Math.round(upMs ?? -1)} ms, ` +
        `the first result came after ${Math.round(firstCaseMs ?? -1)} ms\n` +
        [...results.values()]
          .map((r) => `  ${r.ok ? 'ok  ' : 'FAIL'} ${r.ms} ms ${r.id} ${JSON.stringify(r.measured ?? {})}`)
          .join('\n') +
        CRIU_MIGRATIONS.map(
          (kind) => `\n${migrationLine(kind.runtime, migrated.get(kind.name)!, results.get(kind.name))}`,
        ).join(''),
    );
  }, GUEST_DEADLINE_MS + 60_000);

  afterAll(async () => {
    await migrations?.cleanup();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  for (const id of guestPlan())
    it(id, () => {
      const r = results.get(id);
      if (!r) {
        const tail = boot?.lines.slice(-25).join('\n') ?? '(the guest did not boot)';
        const why = boot?.timedOut ? `the guest was killed after ${GUEST_DEADLINE_MS} ms` : 'no result';
        throw new Error(`${why} for this case; the guest console ended with:\n${tail}`);
      }
      // A migration's host half first: when it failed, the guest's half stopped for it (saying so).
      const host = migrated.get(id);
      if (CRIU_MIGRATIONS.some((kind) => kind.name === id) && !host?.ok)
        throw new Error(
          `the host's half: ${host?.ok === false ? host.error : 'not checked'}` +
            (r.ok ? '' : `\nthe guest's half, after ${r.ms} ms: ${r.error}`),
        );
      if (!r.ok) throw new Error(`failed in the guest after ${r.ms} ms:\n${r.error}`);
    });
});
