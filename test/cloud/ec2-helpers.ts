// Shared setup of the EC2 tests: an emulated EC2 (moto_server behind the fault proxy; see
// src/cloud/ec2-emu/) and ec2 drivers configured for it.
import { DescribeInstancesCommand, DescribeVolumesCommand, type Instance } from '@aws-sdk/client-ec2';
import { encodeBootData } from '../../src/cloud/boot-data.js';
import { parseEc2Config } from '../../src/cloud/ec2/config.js';
import { Ec2Driver } from '../../src/cloud/ec2/driver.js';
import { Ec2Emulator, EMULATOR_CREDENTIALS, type EmulatorOptions } from '../../src/cloud/ec2-emu/emulator.js';
import { motoUnavailable } from '../../src/cloud/ec2-emu/moto.js';
import type { Clock } from '../../src/model/clock.js';
import type { InstanceType } from '../../src/model/types.js';

/** Why the EC2 tests cannot run here (no moto_server), or null. */
export const noMoto = motoUnavailable();

const GiB = 1024 ** 3;

export function ec2type(name: string, providerType: string, extra: Partial<InstanceType> = {}): InstanceType {
  return {
    name,
    providerType,
    vcpus: 2,
    ram: 2 * GiB,
    scratch: 0,
    gpus: 0,
    price: 0.02,
    preemptible: false,
    ...extra,
  };
}

export interface Ec2World {
  emu: Ec2Emulator;
  subnets: string[];
  ami: string;
  /** A driver for the emulator; `over` are keys of the ec2 config section. */
  driver(over?: Record<string, unknown>, clock?: Clock): Ec2Driver;
  /** Every instance moto holds (any state), through moto directly. */
  instances(filters?: { Name: string; Values: string[] }[]): Promise<Instance[]>;
  /** Tags of the volumes attached to an instance. */
  volumeTags(instanceId: string): Promise<Record<string, string>[]>;
  stop(): Promise<void>;
}

export async function ec2World(o: EmulatorOptions = {}): Promise<Ec2World> {
  const emu = await Ec2Emulator.start({ boot: false, ...o });
  const drivers: Ec2Driver[] = [];
  try {
    const { subnets, ami } = await emu.defaults();
    return {
      emu,
      subnets,
      ami,
      driver(over = {}, clock) {
        const d = new Ec2Driver({
          config: parseEc2Config({ endpoint: emu.endpoint, subnets: subnets.slice(0, 3), ami, ...over }),
          credentials: EMULATOR_CREDENTIALS,
          ...(clock ? { clock } : {}),
        });
        drivers.push(d);
        return d;
      },
      async instances(filters) {
        const out: Instance[] = [];
        let NextToken: string | undefined;
        do {
          const p = await emu.direct.send(
            new DescribeInstancesCommand({ ...(filters ? { Filters: filters } : {}), NextToken }),
          );
          for (const r of p.Reservations ?? []) out.push(...(r.Instances ?? []));
          NextToken = p.NextToken || undefined;
        } while (NextToken);
        return out;
      },
      async volumeTags(instanceId) {
        const v = await emu.direct.send(
          new DescribeVolumesCommand({ Filters: [{ Name: 'attachment.instance-id', Values: [instanceId] }] }),
        );
        return (v.Volumes ?? []).map((vol) =>
          Object.fromEntries((vol.Tags ?? []).map((t) => [t.Key!, t.Value!])),
        );
      },
      async stop() {
        for (const d of drivers) d.close();
        await emu.stop();
      },
    };
  } catch (err) {
    await emu.stop();
    throw err;
  }
}

/** Boot data as the dispatcher writes it. */
export function bootData(nodeId: string, apiUrl = 'http://127.0.0.1:9', secret = 'secret-' + nodeId): string {
  return encodeBootData({
    api_url: apiUrl,
    node_id: nodeId,
    bootstrap_secret: secret,
    instance_type: 'small',
  });
}
