// What the cgroup v2 guest runs (guest-main.ts) and the host test expects a result for (cgroup-v2.test.ts):
// the cgroup layer's cases, runtime detection, and the cgroup-dependent runtime cases on each runtime the
// guest has (scripts/guest/flavours/test.sh: runc and docker.io; podman is not in it), and the process
// runtime's bubblewrap sandbox in its cgroup; CRIU's dump and restore of a process (criu-case.ts) and of a
// process container through the process runtime (criu-process-case.ts) and of a runc container through the
// runc runtime (criu-runc-case.ts); a migration of a process container and of a runc container by CRIU
// between two agents through a real API on the host (criu-migrate-case.ts, criu-migrate-host.ts); and the
// agent's pressure watcher on a v2 parent group (pressure-cases.ts).
// Case ids are "<scope>: <case name>".
import { ENGINE_CGROUP_CASES, RUNTIME_CASES, sandboxCase } from '../agent/cases.js';
import { CGROUP_CASES } from '../agent/cgroup-cases.js';
import { enclosingCase, fileCacheCase, watcherCase } from '../agent/pressure-cases.js';
import { CRIU_CASE } from './criu-case.js';
import { CRIU_MIGRATIONS } from './criu-migrate-case.js';
import { CRIU_PROCESS_CASE } from './criu-process-case.js';
import { CRIU_RUNC_CASE } from './criu-runc-case.js';

export const DETECT_CASE =
  'detect: on a cgroup v2 host without a docker daemon, picks runc and says why docker and podman were passed over';
export const DETECT_DOCKER_CASE = 'detect: with dockerd (cgroupfs driver) running on cgroup v2, picks docker';

/** Every case id, in the order the guest runs them (docker last: its daemon starts after the others ran). */
export function guestPlan(): string[] {
  const runtimeCases = (rt: string): string[] => RUNTIME_CASES.map((c) => `${rt}: ${c.name}`);
  return [
    ...CGROUP_CASES.filter((c) => !c.versions || c.versions.includes(2)).map((c) => `cgroup: ${c.name}`),
    DETECT_CASE,
    CRIU_CASE,
    CRIU_PROCESS_CASE,
    CRIU_RUNC_CASE,
    ...CRIU_MIGRATIONS.map((m) => m.name),
    ...runtimeCases('process'),
    `process: ${sandboxCase.name}`,
    ...PRESSURE_CASES.map((c) => `pressure: ${c.name}`),
    ...runtimeCases('runc'),
    DETECT_DOCKER_CASE,
    ...ENGINE_CGROUP_CASES.map((c) => `docker: ${c.name}`),
  ];
}

/** The pressure watcher's cases on v2 (its containers on the process runtime). */
export const PRESSURE_CASES = [fileCacheCase, enclosingCase, watcherCase] as const;

/** The prefix of the console lines that carry results (JSON after it). */
export const RESULT_PREFIX = 'BERTH-CASE ';

/** One case's result as the guest prints it. */
export interface CaseResult {
  id: string;
  ok: boolean;
  ms: number;
  measured?: Record<string, number | string | boolean>;
  error?: string;
}
