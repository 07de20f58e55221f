// How an engine container's end is judged an OOM kill (src/agent/runtimes/engine-handle.ts, collect): the
// engine's word (docker's OOMKilled), the parent group's own count (v2: hierarchical memory.events), and for
// engines that report none (podman 4.3) a SIGKILL Berth did not send with the peak at the limit. The engine
// and the group are stand-ins: the rule is what is tested here; the engines themselves are in
// runtime-conformance (docker, podman) and the v2 guest.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Cgroup, CgroupStats } from '../../src/agent/runtimes/cgroup-common.js';
import {
  EngineHandle,
  type ContainerEngine,
  type EngineState,
} from '../../src/agent/runtimes/engine-handle.js';

const MiB = 1024 * 1024;
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A container that has ended with `state`, its parent group's stats `stats`. */
async function ended(reportsOom: boolean, state: Partial<EngineState>, stats: Partial<CgroupStats>) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-engine-oom-'));
  dirs.push(dir);
  const engine: ContainerEngine = {
    name: reportsOom ? 'docker' : 'podman',
    reportsOom,
    wait: async () => {},
    inspect: async () => ({
      running: false,
      paused: false,
      exitCode: 137,
      oomKilled: false,
      startedAt: '2026-01-01T00:00:00Z',
      finishedAt: '2026-01-01T00:00:01Z',
      upperDir: null,
      ...state,
    }),
    remove: async () => {},
    kill: async () => {},
    pause: async () => {},
    unpause: async () => {},
    copyLogs: async () => {},
  };
  const cgroup = {
    stats: async (): Promise<CgroupStats> => ({
      cpuSeconds: 0.5,
      ramBytes: 0,
      peakRamBytes: 10 * MiB,
      oomKills: 0,
      ramLimit: 64 * MiB,
      inactiveFileBytes: 0,
      ...stats,
    }),
    remove: async () => {},
  } as unknown as Cgroup;
  return (await new EngineHandle(engine, 'c-oom', dir, cgroup).wait()).oomKilled;
}

describe('an engine container judged OOM-killed', () => {
  it("by the engine's word, or by the parent group's count when the engine missed it (docker on v2)", async () => {
    expect(await ended(true, { oomKilled: true }, {})).toBe(true);
    expect(await ended(true, { oomKilled: false }, { oomKills: 1 })).toBe(true);
    expect(await ended(true, { oomKilled: false }, { oomKills: 0 })).toBe(false);
  });

  it('for an engine that reports none: a SIGKILL Berth did not send, with the peak at the limit', async () => {
    expect(await ended(false, {}, { peakRamBytes: 64 * MiB })).toBe(true);
    expect(await ended(false, {}, { peakRamBytes: 10 * MiB })).toBe(false);
    expect(await ended(false, { exitCode: 1 }, { peakRamBytes: 64 * MiB })).toBe(false);
    // A reliable engine's exit 137 at the limit is not second-guessed.
    expect(await ended(true, {}, { peakRamBytes: 64 * MiB })).toBe(false);
  });
});
