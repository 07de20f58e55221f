import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CatalogError, defaultCatalog, loadCatalog, parseCatalog } from '../../src/sim/catalog.js';

const GiB = 1024 ** 3;

describe('default catalog', () => {
  const cat = defaultCatalog();
  const byName = new Map(cat.map((t) => [t.name, t]));

  it('has four families, sizes up to at least 192 vcpus, on-demand and spot of each, unique names', () => {
    expect(new Set(cat.map((t) => t.name)).size).toBe(cat.length);
    expect(cat).toHaveLength(80);
    for (const fam of ['general', 'compute', 'memory', 'gpu']) {
      const od = cat.filter((t) => t.name.startsWith(`${fam}-`) && !t.preemptible);
      expect(Math.max(...od.map((t) => t.vcpus))).toBeGreaterThanOrEqual(192);
      for (const t of od)
        expect(byName.get(`${t.name}-spot`)).toMatchObject({ vcpus: t.vcpus, ram: t.ram, preemptible: true });
    }
    expect(cat.filter((t) => t.gpus > 0).length).toBe(16);
  });

  it('has realistic relative prices: compute < general < memory per vcpu, spot a third to half of on-demand, gpus dear', () => {
    const perVcpu = (n: string) => byName.get(n)!.price / byName.get(n)!.vcpus;
    expect(perVcpu('compute-16')).toBeLessThan(perVcpu('general-16'));
    expect(perVcpu('general-16')).toBeLessThan(perVcpu('memory-16'));
    expect(byName.get('general-2')!.price).toBeCloseTo(0.1008, 4);
    expect(byName.get('memory-16')!.ram).toBe(128 * GiB);
    for (const t of cat.filter((x) => x.preemptible)) {
      const od = byName.get(t.name.replace(/-spot$/, ''))!;
      expect(t.price / od.price).toBeGreaterThan(0.3);
      expect(t.price / od.price).toBeLessThan(0.5);
    }
    expect(byName.get('gpu-4')!.price).toBeGreaterThan(byName.get('general-16')!.price);
  });

  it('is sorted by name and stable', () => {
    expect(cat.map((t) => t.name)).toEqual([...cat.map((t) => t.name)].sort());
    expect(defaultCatalog()).toEqual(cat);
  });
});

describe('catalog files', () => {
  const one = {
    name: 't1',
    vcpus: 1,
    ram: '1GiB',
    scratch: '1GiB',
    gpus: 0,
    price: 0.123,
    preemptible: false,
  };

  it('parses the DESIGN §6.4 shape, with defaults and provider_type', () => {
    expect(
      parseCatalog({
        instance_types: [
          one,
          { name: 'x.large', provider_type: 'm7i.large', vcpus: '2', ram: 8 * GiB, price: 0.1 },
        ],
      }),
    ).toEqual([
      {
        name: 't1',
        providerType: 't1',
        vcpus: 1,
        ram: GiB,
        scratch: GiB,
        gpus: 0,
        price: 0.123,
        preemptible: false,
      },
      {
        name: 'x.large',
        providerType: 'm7i.large',
        vcpus: 2,
        ram: 8 * GiB,
        scratch: 0,
        gpus: 0,
        price: 0.1,
        preemptible: false,
      },
    ]);
    expect(parseCatalog([one])).toHaveLength(1);
  });

  it.each([
    [{ instance_types: [{ ...one, ram: 'lots' }] }, 'instance_types[0].ram: expected a size such as 4GiB'],
    [{ instance_types: [{ ...one, ram: 0 }] }, 'instance_types[0].ram: expected a size above zero, got 0'],
    [{ instance_types: [{ ...one, price: -1 }] }, 'instance_types[0].price: expected a price per hour >= 0'],
    [
      { instance_types: [{ ...one, vcpus: 0 }] },
      'instance_types[0].vcpus: expected a positive number of CPUs',
    ],
    [{ instance_types: [{ ...one, gpus: -1 }] }, 'instance_types[0].gpus: expected a whole number >= 0'],
    [{ instance_types: [{ ...one, name: 'a b' }] }, 'instance_types[0].name: expected a name of letters'],
    [{ instance_types: [{ ...one, cost: 1 }] }, 'instance_types[0]: unknown field "cost"'],
    [{ instance_types: [{ ...one, price: undefined }] }, 'instance_types[0].price: required'],
    [{ instance_types: [one, one] }, 'instance_types[1].name: duplicate name "t1"'],
    [{ instance_types: [] }, 'instance_types: expected a non-empty array'],
    [{ types: [] }, 'unknown field "types"; expected "instance_types"'],
  ])('rejects %j naming the field', (input, message) => {
    expect(() => parseCatalog(input)).toThrow(CatalogError);
    expect(() => parseCatalog(input)).toThrow(message);
  });

  const dir = mkdtempSync(join(tmpdir(), 'berth-catalog-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  it('loads a file and names it in errors', () => {
    writeFileSync(join(dir, 'ok.json'), JSON.stringify({ instance_types: [one] }));
    expect(loadCatalog(join(dir, 'ok.json'))[0]!.name).toBe('t1');
    writeFileSync(join(dir, 'bad.json'), '{');
    expect(() => loadCatalog(join(dir, 'bad.json'))).toThrow(/bad\.json: cannot read a JSON catalog/);
    writeFileSync(join(dir, 'bad2.json'), JSON.stringify([{ ...one, price: 'x' }]));
    expect(() => loadCatalog(join(dir, 'bad2.json'))).toThrow(/bad2\.json: instance_types\[0\]\.price/);
  });
});
