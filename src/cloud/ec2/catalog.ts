// `berth catalog ec2`: instance types for a dispatch config from EC2's DescribeInstanceTypes (shapes:
// vCPUs, memory, GPUs) and a price file (EC2 has no price in that answer and the Pricing API is another
// service: prices stay configuration). Each priced type gives an on-demand entry and, when the file has a
// spot price, a preemptible "-spot" entry.
import { DescribeInstanceTypesCommand, type EC2Client, type InstanceTypeInfo } from '@aws-sdk/client-ec2';
import { formatSize } from '../../model/units.js';

/** Prices per hour by EC2 type: a number (on-demand) or {on_demand, spot}. */
export type PriceFile = Record<string, number | { on_demand?: number; spot?: number }>;

export class CatalogInputError extends Error {}

/** Validates a price file; errors name the entry. */
export function parsePriceFile(
  value: unknown,
  source = 'prices',
): Map<string, { onDemand: number | null; spot: number | null }> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new CatalogInputError(
      `${source}: expected an object such as {"m5.large": {"on_demand": 0.096, "spot": 0.035}}`,
    );
  const out = new Map<string, { onDemand: number | null; spot: number | null }>();
  const price = (v: unknown, at: string) => {
    if (v === undefined || v === null) return null;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
      throw new CatalogInputError(`${at}: expected a price per hour >= 0, got ${JSON.stringify(v)}`);
    return v;
  };
  for (const [type, v] of Object.entries(value)) {
    if (!/^[a-z0-9-]+\.[a-z0-9-]+$/.test(type))
      throw new CatalogInputError(
        `${source}: ${JSON.stringify(type)}: expected an EC2 instance type such as m5.large`,
      );
    if (typeof v === 'number') out.set(type, { onDemand: price(v, `${source}.${type}`), spot: null });
    else if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      const extra = Object.keys(v).filter((k) => k !== 'on_demand' && k !== 'spot');
      if (extra.length > 0)
        throw new CatalogInputError(`${source}.${type}.${extra[0]}: unknown key (on_demand, spot)`);
      const o = v as { on_demand?: unknown; spot?: unknown };
      const p = {
        onDemand: price(o.on_demand, `${source}.${type}.on_demand`),
        spot: price(o.spot, `${source}.${type}.spot`),
      };
      if (p.onDemand === null && p.spot === null)
        throw new CatalogInputError(`${source}.${type}: expected on_demand or spot`);
      out.set(type, p);
    } else
      throw new CatalogInputError(
        `${source}.${type}: expected a price or {on_demand, spot}, got ${JSON.stringify(v)}`,
      );
  }
  if (out.size === 0) throw new CatalogInputError(`${source}: no prices`);
  return out;
}

/** Every instance type EC2 offers in the region (all pages, 100 a page). */
export async function describeInstanceTypes(ec2: EC2Client): Promise<InstanceTypeInfo[]> {
  const out: InstanceTypeInfo[] = [];
  let NextToken: string | undefined;
  do {
    const page = await ec2.send(new DescribeInstanceTypesCommand({ MaxResults: 100, NextToken }));
    out.push(...(page.InstanceTypes ?? []));
    NextToken = page.NextToken || undefined;
  } while (NextToken);
  return out;
}

/** One dispatch-config instance type entry (the JSON form of DESIGN §6.4). */
export interface CatalogEntry {
  name: string;
  provider_type: string;
  vcpus: number;
  ram: string;
  scratch: string;
  gpus: number;
  price: number;
  preemptible: boolean;
}

/** The instance_types entries for the priced types; names EC2 does not know are an error. */
export function buildCatalog(
  infos: InstanceTypeInfo[],
  prices: Map<string, { onDemand: number | null; spot: number | null }>,
  scratchBytes: number,
): CatalogEntry[] {
  const byName = new Map(infos.map((i) => [i.InstanceType as string, i]));
  const unknown = [...prices.keys()].filter((t) => !byName.has(t));
  if (unknown.length > 0)
    throw new CatalogInputError(
      `EC2 does not offer ${unknown.join(', ')} in this region (price file entries)`,
    );
  const out: CatalogEntry[] = [];
  for (const [type, p] of [...prices].sort(([a], [b]) => a.localeCompare(b))) {
    const info = byName.get(type)!;
    const shape = {
      provider_type: type,
      vcpus: info.VCpuInfo?.DefaultVCpus ?? 1,
      ram: formatSize((info.MemoryInfo?.SizeInMiB ?? 0) * 1024 * 1024),
      scratch: formatSize(scratchBytes),
      gpus: (info.GpuInfo?.Gpus ?? []).reduce((n, g) => n + (g.Count ?? 0), 0),
    };
    const spotOk = (info.SupportedUsageClasses ?? ['spot']).includes('spot');
    if (p.onDemand !== null) out.push({ name: type, ...shape, price: p.onDemand, preemptible: false });
    if (p.spot !== null && spotOk)
      out.push({ name: `${type}-spot`, ...shape, price: p.spot, preemptible: true });
  }
  return out;
}
