// The demo workload of `berth up --demo`: containers of several sizes and priorities, so one sees
// instances boot, run several containers each, and shut down when idle.
import type { RequestSpec } from '../model/request.js';
import { normalizeRequest } from '../model/request.js';

export const DEMO_PREFIX = 'demo-';

/** The demo's requests (plain processes: no image, so it runs on any machine). */
export function demoRequests(): RequestSpec[] {
  const sh = (script: string) => ['/bin/sh', '-c', script];
  const specs: Record<string, unknown>[] = [];
  for (let i = 1; i <= 6; i++) {
    specs.push({
      name: `${DEMO_PREFIX}small-${i}`,
      // A line a second for a few seconds: something to watch in the dashboard's log tail.
      command: sh(
        `for s in 1 2 3 4 5 6; do echo "small job ${i} on $(hostname): step $s of 6"; sleep 1; done; echo "small job ${i} done"`,
      ),
      vcpus: 0.25,
      ram: '128MiB',
      priority: 400,
    });
  }
  for (let i = 1; i <= 3; i++) {
    specs.push({
      name: `${DEMO_PREFIX}count-${i}`,
      command: sh(`i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo "counted to $i"`),
      vcpus: 0.5,
      ram: '256MiB',
      priority: 600,
    });
  }
  specs.push({
    name: `${DEMO_PREFIX}urgent`,
    command: sh('echo "urgent job first"; sleep 1'),
    vcpus: 0.5,
    ram: '128MiB',
    priority: 900,
  });
  specs.push({
    name: `${DEMO_PREFIX}big`,
    command: sh('echo "a job that needs the bigger machine"; sleep 3; echo done'),
    vcpus: 1,
    ram: '3GiB',
    priority: 500,
  });
  specs.push({
    name: `${DEMO_PREFIX}fails-once`,
    command: sh('exit 3'),
    vcpus: 0.25,
    ram: '64MiB',
    priority: 300,
    container_count_max: 2,
  });
  return specs.map((s) => normalizeRequest(s));
}
