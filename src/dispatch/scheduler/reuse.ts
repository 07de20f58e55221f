// How likely an idle instance is to be used again soon (issue 14: no idle machines). The snapshot's
// `arrivals` count the containers of each shape that arrived in the last arrival_window; a type's arrival
// rate is the rate of those that could use an instance of it (the share rule, fitting.ts). The expected
// number of such arrivals within a horizon is rate × horizon; the scheduler keeps about that many idle
// instances of the type warm (shutdown.ts), and lets the rest go.
import type { InstanceType } from '../../model/types.js';
import type { ShapeCache } from './fitting.js';
import type { SnapshotContainer, Snapshot } from './types.js';

/** Arrivals per millisecond that could use an instance of each type, by type index. */
export function arrivalRates(snap: Snapshot, sortedTypes: InstanceType[], shapes: ShapeCache): Float64Array {
  const rates = new Float64Array(sortedTypes.length);
  const window = snap.config.arrivalWindowMs;
  for (const a of snap.arrivals) {
    if (a.count <= 0) continue;
    // An arrival is described like a container; only its shape matters here.
    const probe: SnapshotContainer = {
      id: '',
      state: 'Queued',
      priority: 1,
      queuedAt: snap.now,
      vcpus: a.vcpus,
      ram: a.ram,
      scratch: a.scratch,
      gpus: a.gpus,
      preemptible: a.preemptible,
      instanceTypes: a.instanceTypes,
      instance: null,
      lockCount: 0,
      owner: '',
      spotInterruptions: 0,
    };
    const shape = shapes.get(probe);
    if (shape.unsatisfiable !== null) continue;
    for (let i = 0; i < rates.length; i++) if (shape.usableByIndex[i] === 1) rates[i]! += a.count / window;
  }
  return rates;
}
