// The simulator's instance catalog: a realistic default, or one loaded from a JSON file.
//
// The default has four families with the shapes and relative prices of public cloud list prices
// (AWS us-east-1 on-demand Linux, 2024, rounded: m7i, c7i, r7i and g5; spot at the typical 58–67 %
// discount). Type names are generic ("general-16", "compute-16-spot") because the simulator needs
// realistic ratios, not any one provider's names. The general and compute families add a 384-vcpu
// size, like the largest AMD shapes some clouds sell, so every job of the 256-node Lublin trace fits.
import { readFileSync } from 'node:fs';
import type { InstanceType } from '../model/types.js';
import { parseAt, parseSize, parseVcpus } from '../model/units.js';

const GiB = 1024 ** 3;

interface Family {
  name: string;
  ramPerVcpu: number;
  /** On-demand price per vcpu-hour. */
  pricePerVcpu: number;
  /** Spot price as a fraction of on-demand. */
  spotFactor: number;
  sizes: number[];
}

const FAMILIES: Family[] = [
  // m7i.large: 2 vcpu, 8 GiB, $0.1008/h.
  {
    name: 'general',
    ramPerVcpu: 4 * GiB,
    pricePerVcpu: 0.0504,
    spotFactor: 0.38,
    sizes: [2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 384],
  },
  // c7i.large: 2 vcpu, 4 GiB, $0.08925/h.
  {
    name: 'compute',
    ramPerVcpu: 2 * GiB,
    pricePerVcpu: 0.044625,
    spotFactor: 0.36,
    sizes: [2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 384],
  },
  // r7i.large: 2 vcpu, 16 GiB, $0.1323/h.
  {
    name: 'memory',
    ramPerVcpu: 8 * GiB,
    pricePerVcpu: 0.06615,
    spotFactor: 0.33,
    sizes: [2, 4, 8, 16, 32, 48, 64, 96, 128, 192],
  },
];

/** g5 shapes: vcpus, ram GiB, gpus, on-demand $/h (the GPU count does not grow linearly with size). */
const GPU_SHAPES: Array<[number, number, number, number]> = [
  [4, 16, 1, 1.006],
  [8, 32, 1, 1.212],
  [16, 64, 1, 1.624],
  [32, 128, 1, 2.448],
  [48, 192, 4, 5.672],
  [64, 256, 1, 4.096],
  [96, 384, 4, 8.144],
  [192, 768, 8, 16.288],
];
const GPU_SPOT_FACTOR = 0.42;

/** Attached scratch disk: 32 GiB per vcpu, at least 64 GiB (a sizing rule, not a provider's). */
function scratchFor(vcpus: number): number {
  return Math.max(64 * GiB, vcpus * 32 * GiB);
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

function withSpot(t: InstanceType, spotFactor: number): InstanceType[] {
  const spot = `${t.name}-spot`;
  return [
    t,
    { ...t, name: spot, providerType: spot, price: round4(t.price * spotFactor), preemptible: true },
  ];
}

/** The default catalog: 80 types, on-demand and spot, sorted by name. */
export function defaultCatalog(): InstanceType[] {
  const out: InstanceType[] = [];
  for (const f of FAMILIES)
    for (const vcpus of f.sizes) {
      const name = `${f.name}-${vcpus}`;
      const t: InstanceType = {
        name,
        providerType: name,
        vcpus,
        ram: vcpus * f.ramPerVcpu,
        scratch: scratchFor(vcpus),
        gpus: 0,
        price: round4(vcpus * f.pricePerVcpu),
        preemptible: false,
      };
      out.push(...withSpot(t, f.spotFactor));
    }
  for (const [vcpus, ramGiB, gpus, price] of GPU_SHAPES) {
    const name = `gpu-${vcpus}`;
    const t: InstanceType = {
      name,
      providerType: name,
      vcpus,
      ram: ramGiB * GiB,
      scratch: scratchFor(vcpus),
      gpus,
      price,
      preemptible: false,
    };
    out.push(...withSpot(t, GPU_SPOT_FACTOR));
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** A catalog file that cannot be used; the message names the field. */
export class CatalogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CatalogError';
  }
}

const FIELDS = ['name', 'provider_type', 'vcpus', 'ram', 'scratch', 'gpus', 'price', 'preemptible'];

function unit<T>(path: string, parse: (v: unknown) => T, v: unknown): T {
  return parseAt(path, parse, v, CatalogError);
}

function parseType(v: unknown, i: number): InstanceType {
  const at = `instance_types[${i}]`;
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new CatalogError(`${at}: expected an object, got ${JSON.stringify(v)}`);
  const o = v as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !FIELDS.includes(k));
  if (unknown.length > 0)
    throw new CatalogError(
      `${at}: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}; expected ${FIELDS.join(', ')}`,
    );
  if (typeof o.name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(o.name))
    throw new CatalogError(
      `${at}.name: expected a name of letters, digits, ".", "_" or "-", got ${JSON.stringify(o.name)}`,
    );
  const providerType = o.provider_type ?? o.name;
  if (typeof providerType !== 'string' || providerType === '')
    throw new CatalogError(
      `${at}.provider_type: expected a non-empty string, got ${JSON.stringify(o.provider_type)}`,
    );
  for (const k of ['vcpus', 'ram', 'price'])
    if (o[k] === undefined) throw new CatalogError(`${at}.${k}: required`);
  const ram = unit(`${at}.ram`, parseSize, o.ram);
  if (ram <= 0) throw new CatalogError(`${at}.ram: expected a size above zero, got ${JSON.stringify(o.ram)}`);
  const gpus = o.gpus ?? 0;
  if (typeof gpus !== 'number' || !Number.isInteger(gpus) || gpus < 0)
    throw new CatalogError(`${at}.gpus: expected a whole number >= 0, got ${JSON.stringify(o.gpus)}`);
  if (typeof o.price !== 'number' || !Number.isFinite(o.price) || o.price < 0)
    throw new CatalogError(
      `${at}.price: expected a price per hour >= 0 such as 0.192, got ${JSON.stringify(o.price)}`,
    );
  const preemptible = o.preemptible ?? false;
  if (typeof preemptible !== 'boolean')
    throw new CatalogError(`${at}.preemptible: expected true or false, got ${JSON.stringify(o.preemptible)}`);
  return {
    name: o.name,
    providerType,
    vcpus: unit(`${at}.vcpus`, parseVcpus, o.vcpus),
    ram,
    scratch: unit(`${at}.scratch`, parseSize, o.scratch ?? 0),
    gpus,
    price: o.price,
    preemptible,
  };
}

/**
 * Validates a catalog: `{"instance_types": [...]}` or a bare array, each entry with the fields of
 * DESIGN §6.4 (name, vcpus, ram, scratch, gpus, price, preemptible) plus optional provider_type.
 */
export function parseCatalog(value: unknown): InstanceType[] {
  let list = value;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const extra = Object.keys(value).filter((k) => k !== 'instance_types');
    if (extra.length > 0)
      throw new CatalogError(
        `unknown field ${extra.map((k) => JSON.stringify(k)).join(', ')}; expected "instance_types"`,
      );
    list = (value as Record<string, unknown>).instance_types;
  }
  if (!Array.isArray(list) || list.length === 0)
    throw new CatalogError(
      `instance_types: expected a non-empty array of instance types, got ${JSON.stringify(list)}`,
    );
  const types = list.map(parseType);
  const seen = new Set<string>();
  types.forEach((t, i) => {
    if (seen.has(t.name))
      throw new CatalogError(`instance_types[${i}].name: duplicate name ${JSON.stringify(t.name)}`);
    seen.add(t.name);
  });
  return types;
}

/** Reads and validates a catalog file; errors name the file. */
export function loadCatalog(path: string): InstanceType[] {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new CatalogError(`${path}: cannot read a JSON catalog: ${(err as Error).message}`);
  }
  try {
    return parseCatalog(value);
  } catch (err) {
    if (err instanceof CatalogError) throw new CatalogError(`${path}: ${err.message}`);
    throw err;
  }
}
