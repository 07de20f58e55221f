// Runtime auto-detection against what this machine really has.
import { describe, expect, it } from 'vitest';
import { RUNTIME_NAMES, createRuntime, detectRuntime, runtimeFor } from '../../src/agent/runtimes/detect.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';

describe('detectRuntime', () => {
  it('picks the first available runtime in preference order and says why the others were passed over', async () => {
    const availability = await Promise.all(
      RUNTIME_NAMES.map(async (n) => [n, await createRuntime(n).available()] as const),
    );
    const first = availability.find(([, why]) => why === null)![0];
    const { runtime, skipped } = await detectRuntime();
    expect(runtime.name).toBe(first);
    for (const [name, why] of availability.slice(0, RUNTIME_NAMES.indexOf(first)))
      expect(skipped[name]).toBe(why);
  });

  it('falls back to the process runtime, which is always available', async () => {
    const { runtime } = await detectRuntime(['process']);
    expect(runtime.name).toBe('process');
    expect(await runtime.available()).toBeNull();
  });

  it('a container without an image always runs on the process runtime', () => {
    const proc = new ProcessRuntime();
    const docker = createRuntime('docker');
    expect(runtimeFor(null, docker, proc)).toBe(proc);
    expect(runtimeFor('', docker, proc)).toBe(proc);
    expect(runtimeFor('debian:12', docker, proc)).toBe(docker);
  });

  it('an unknown runtime name is refused with the choices', () => {
    expect(() => createRuntime('lxc' as never)).toThrow(
      'runtime: expected one of docker, podman, runc, process, vm, got "lxc"',
    );
  });
});
