// Shared fixtures for the cloud tests.
import type { InstanceType } from '../../src/model/types.js';

const GiB = 1024 ** 3;

/** An instance type for tests; `name` doubles as the provider type. */
export function itype(name: string, vcpus = 2, extra: Partial<InstanceType> = {}): InstanceType {
  return {
    name,
    providerType: name,
    vcpus,
    ram: vcpus * 4 * GiB,
    scratch: 50 * GiB,
    gpus: 0,
    price: 0.05 * vcpus,
    preemptible: false,
    ...extra,
  };
}
