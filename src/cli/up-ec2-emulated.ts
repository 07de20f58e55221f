// `berth up --cloud ec2-emulated`: the same all-in-one Berth, but its dispatcher drives the ec2 driver
// against an EC2 emulated on this machine (moto behind Berth's fault proxy, every instance's UserData
// booted for real: src/cloud/ec2-emu/). Instances are created through the AWS SDK, boot through the
// cloud-init script, register, run, idle and are terminated, as on AWS.
import { defaultBerthBin } from '../cloud/local/driver.js';
import type { Ec2Emulator } from '../cloud/ec2-emu/emulator.js';
import { UsageError } from './errors.js';

export interface EmulatedCloud {
  emulator: Ec2Emulator;
  /** Where the API must listen so that the booted agents reach it. */
  listenHost: string;
  /** The dispatch config for the emulated EC2. */
  dispatch: Record<string, unknown>;
  credentials: { accessKeyId: string; secretAccessKey: string };
}

/** EC2 types for the demo (2024 us-east-1 on-demand prices; the spot one at a typical discount). */
export const EMULATED_TYPES = [
  { name: 't3-small', provider_type: 't3.small', vcpus: 2, ram: '2GiB', scratch: '4GiB', price: 0.0208 },
  { name: 't3-large', provider_type: 't3.large', vcpus: 2, ram: '8GiB', scratch: '8GiB', price: 0.0832 },
  {
    name: 't3-small-spot',
    provider_type: 't3.small',
    vcpus: 2,
    ram: '2GiB',
    scratch: '4GiB',
    price: 0.0067,
    preemptible: true,
  },
];

/** Starts the emulated EC2 and makes its dispatch config; `agentArgs`: flags for the booted agents. */
export async function startEmulatedCloud(
  say: (line: string) => void,
  agentArgs: string[] = [],
): Promise<EmulatedCloud> {
  const { motoUnavailable } = await import('../cloud/ec2-emu/moto.js');
  const why = motoUnavailable();
  if (why) throw new UsageError(`--cloud ec2-emulated needs moto_server: ${why}`, 1);
  const { Ec2Emulator, EMULATOR_CREDENTIALS } = await import('../cloud/ec2-emu/emulator.js');
  const emulator = await Ec2Emulator.start({ log: say });
  try {
    const { subnets, ami } = await emulator.defaults();
    return {
      emulator,
      listenHost: emulator.hostAddr ?? '127.0.0.1',
      credentials: EMULATOR_CREDENTIALS,
      dispatch: {
        driver: 'ec2',
        instance_types: EMULATED_TYPES,
        ec2: {
          endpoint: emulator.endpoint,
          region: 'us-east-1',
          subnets: subnets.slice(0, 3),
          ami,
          tags: { 'cost-center': 'berth-demo' },
          // The emulated machines share this host's file system: the agent is the one installed here.
          agent_install: { preinstalled: `${process.execPath} ${defaultBerthBin()}` },
          agent_args: ['--ping-wait', '5s', '--notice-poll', '1s', ...agentArgs],
        },
      },
    };
  } catch (err) {
    await emulator.stop();
    throw err;
  }
}

/** Stops the emulated EC2 (every instance it still lists is terminated and its machine stopped), saying so. */
export async function stopEmulatedCloud(cloud: EmulatedCloud, say: (line: string) => void): Promise<void> {
  const left = await cloud.emulator.liveInstances().catch(() => [] as string[]);
  say(
    left.length === 0
      ? 'the emulated EC2 has no instance left running; stopping it'
      : `the emulated EC2 still lists ${left.length} instance(s) (${left.join(', ')}); terminating them and stopping it`,
  );
  await cloud.emulator.stop().catch((err: Error) => say(`stopping the emulated EC2: ${err.message}`));
}
