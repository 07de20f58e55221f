// Runs inside the cgroup v2 guest (bundled by cgroup-v2.test.ts, started by the guest's /mnt/data/run):
// every case of plan.ts, in its order, each reported as one console line `BERTH-CASE {json}`. A case fails
// on a wrong result, on an exception, and when it leaves a cgroup, mount or container behind.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { probeCgroups } from '../../src/agent/runtimes/cgroup.js';
import { createRuntime, detectRuntime, type RuntimeName } from '../../src/agent/runtimes/detect.js';
import { DOCKER_TIMEOUT_MS } from '../../src/agent/runtimes/docker-api.js';
import { DockerRuntime } from '../../src/agent/runtimes/docker.js';
import {
  ENGINE_CGROUP_CASES,
  RUNTIME_CASES,
  TIME_SCALE,
  sandboxCase,
  type Measured,
  type RuntimeCase,
} from '../agent/cases.js';
import { CGROUP_CASES } from '../agent/cgroup-cases.js';
import {
  TEST_CACHE,
  TEST_ROOTFS_TAR,
  cleanupHandles,
  cleanupWorkDirs,
  leftovers,
  waitFor,
} from '../agent/helpers.js';
import { CRIU_CASE, criuCase } from './criu-case.js';
import { CRIU_MIGRATE_FILE, CRIU_MIGRATIONS, criuMigrateCase } from './criu-migrate-case.js';
import { CRIU_PROCESS_CASE, criuProcessCase } from './criu-process-case.js';
import { CRIU_RUNC_CASE, criuRuncCase } from './criu-runc-case.js';
import { DETECT_CASE, DETECT_DOCKER_CASE, PRESSURE_CASES, RESULT_PREFIX, type CaseResult } from './plan.js';

async function report(id: string, run: () => Promise<Measured>): Promise<void> {
  const t0 = performance.now();
  let result: CaseResult;
  try {
    const measured = await run();
    await cleanupHandles();
    assert.deepEqual(await leftovers(), [], 'cgroups, mounts or containers left behind');
    result = { id, ok: true, ms: Math.round(performance.now() - t0), measured };
  } catch (err) {
    await cleanupHandles().catch(() => {});
    await leftovers().catch(() => []);
    const error = (err as Error).stack ?? String(err);
    result = { id, ok: false, ms: Math.round(performance.now() - t0), error };
  }
  await cleanupWorkDirs();
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`);
}

async function runtimeCases(
  name: RuntimeName,
  image: string | null,
  cases: readonly RuntimeCase[] = RUNTIME_CASES,
): Promise<void> {
  // docker's start and stop take tens of seconds under emulation: its API deadline is scaled as ours are.
  const runtime =
    name === 'docker'
      ? new DockerRuntime({ pull: false, apiTimeoutMs: DOCKER_TIMEOUT_MS * TIME_SCALE })
      : createRuntime(name, { pull: false });
  for (const c of cases) await report(`${name}: ${c.name}`, () => c.run(runtime, image));
}

for (const c of CGROUP_CASES)
  if (!c.versions || c.versions.includes(2)) await report(`cgroup: ${c.name}`, () => c.run());

await report(DETECT_CASE, async () => {
  assert.equal((await probeCgroups()).version, 2, 'cgroup version');
  const { runtime, skipped } = await detectRuntime();
  assert.equal(runtime.name, 'runc', `detected runtime (passed over: ${JSON.stringify(skipped)})`);
  assert.match(skipped.docker ?? '', /docker daemon not answering/, 'why docker was passed over');
  assert.match(skipped.podman ?? '', /podman not usable/, 'why podman was passed over');
  assert.equal(await createRuntime('process').available(), null, 'process available');
  return { picked: runtime.name };
});

await report(CRIU_CASE, criuCase);
await report(CRIU_PROCESS_CASE, criuProcessCase);
await report(CRIU_RUNC_CASE, criuRuncCase);
// The host wrote its setup (the API's address, its status address, per runtime the two nodes and the
// counter it assigned to A) beside `run`.
for (const kind of CRIU_MIGRATIONS)
  await report(kind.name, () =>
    criuMigrateCase(kind, JSON.parse(readFileSync(join(TEST_CACHE, CRIU_MIGRATE_FILE), 'utf8'))),
  );

await runtimeCases('process', null);
await runtimeCases('process', null, [sandboxCase]);
for (const c of PRESSURE_CASES) await report(`pressure: ${c.name}`, () => c.run());
await runtimeCases('runc', TEST_ROOTFS_TAR);

// docker last: its daemon is started here (the guest has no systemd), as .ci/setup.d/20-runtimes.sh starts
// it on the host, and stopped at the end. Its image is the runc tarball, imported through the Engine API.
const log = openSync('/tmp/dockerd.log', 'a');
const dockerd = spawn('dockerd', ['--iptables=false', '--bridge=none', '--ip-masq=false'], {
  stdio: ['ignore', log, log],
});
await report(DETECT_DOCKER_CASE, async () => {
  const t0 = performance.now();
  const docker = createRuntime('docker');
  try {
    await waitFor(async () => (await docker.available()) === null, 12_000 * TIME_SCALE, 'dockerd to answer');
  } catch (err) {
    const tail = readFileSync('/tmp/dockerd.log', 'utf8').slice(-2000);
    throw new Error(`${(err as Error).message}: ${await docker.available()}\n${tail}`);
  }
  const dockerdMs = Math.round(performance.now() - t0);
  const { runtime } = await detectRuntime();
  assert.equal(runtime.name, 'docker', 'detected runtime');
  return { dockerdMs };
});
await runtimeCases('docker', TEST_ROOTFS_TAR, ENGINE_CGROUP_CASES);
dockerd.kill('SIGTERM');
await once(dockerd, 'exit');
// The shim handles keep polling timers for containers that are gone; nothing else is left to wait for.
process.exit(0);
