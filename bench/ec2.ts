// `npm run bench -- ec2 [--json] [--creates N] [--concurrency 1,10,50] [--latency 50ms,1s]`
//
// Creates per second through the ec2 driver (the AWS SDK, RunInstances with tags, user data, ClientToken)
// against the emulated EC2 (moto behind the fault proxy, nothing booted), with the proxy adding a fixed API
// latency to every call, for N creates issued with a given number in flight at once. The dispatcher's own
// act loop is not measured: this is the driver's throughput, the ceiling for a dispatcher that overlaps
// its creates. moto itself answers a RunInstances in ~20–40 ms here; at 50 ms of latency that is part of
// what is measured.
import { performance } from 'node:perf_hooks';
import { parseEc2Config } from '../src/cloud/ec2/config.js';
import { Ec2Driver } from '../src/cloud/ec2/driver.js';
import { Ec2Emulator, EMULATOR_CREDENTIALS } from '../src/cloud/ec2-emu/emulator.js';
import { benchArgs, opt } from './args.js';

interface Row {
  latencyMs: number;
  concurrency: number;
  creates: number;
  seconds: number;
  createsPerSecond: number;
  medianCreateMs: number;
}

/** The options the EC2 benches share (this one and dispatch-creates). */
export const EC2_OPTIONS = {
  json: opt.flag('print JSON'),
  concurrency: opt.ints('1,10,50', 'creates in flight, one run each'),
  latency: opt.durations('50ms,1s', "the emulator's API latency, one run each"),
};

/** The instance type every create of the EC2 benches asks for. */
export const BENCH_TYPE = {
  name: 'small',
  providerType: 't3.small',
  vcpus: 2,
  ram: 2 * 1024 ** 3,
  scratch: 20 * 1024 ** 3,
  gpus: 0,
  price: 0.0208,
  preemptible: false,
};

export async function run(args: string[]): Promise<number> {
  const {
    json,
    creates,
    concurrency: levels,
    latency: latencies,
  } = benchArgs('ec2', args, { ...EC2_OPTIONS, creates: opt.int(100, 'instances created per run') });
  const emu = await Ec2Emulator.start({ boot: false });
  const rows: Row[] = [];
  try {
    const { subnets, ami } = await emu.defaults();
    const driver = new Ec2Driver({
      config: parseEc2Config({ endpoint: emu.endpoint, subnets: subnets.slice(0, 3), ami }),
      credentials: EMULATOR_CREDENTIALS,
    });
    const type = BENCH_TYPE;
    let seq = 0;
    for (const latencyMs of latencies) {
      emu.setFaults({ latency: `${latencyMs}ms` });
      for (const concurrency of levels) {
        const times: number[] = [];
        let next = 0;
        const t0 = performance.now();
        const worker = async () => {
          while (next < creates) {
            next++;
            const node = `n-bench${String(++seq).padStart(11, '0')}`;
            const s = performance.now();
            await driver.create(
              type,
              { 'berth-cluster': 'bench', 'berth-tag': 'bench', 'berth-node': node },
              JSON.stringify({
                api_url: 'http://127.0.0.1:9',
                node_id: node,
                bootstrap_secret: 'x'.repeat(43),
                instance_type: type.name,
              }),
            );
            times.push(performance.now() - s);
          }
        };
        await Promise.all(Array.from({ length: concurrency }, worker));
        const seconds = (performance.now() - t0) / 1000;
        times.sort((a, b) => a - b);
        const row = {
          latencyMs,
          concurrency,
          creates,
          seconds: Math.round(seconds * 100) / 100,
          createsPerSecond: Math.round((creates / seconds) * 10) / 10,
          medianCreateMs: Math.round(times[Math.floor(times.length / 2)]!),
        };
        rows.push(row);
        if (!json)
          console.log(
            `latency ${latencyMs} ms, ${concurrency} in flight: ${row.createsPerSecond} creates/s (${creates} in ${row.seconds} s, median ${row.medianCreateMs} ms each)`,
          );
        // Terminate what was made, so that moto's lists (and its answers) stay the same size for every row.
        emu.setFaults({});
        for (const id of await emu.liveInstances()) await driver.destroy(id);
        emu.setFaults({ latency: `${latencyMs}ms` });
      }
    }
    driver.close();
  } finally {
    await emu.stop();
  }
  if (json) console.log(JSON.stringify({ bench: 'ec2', rows }, null, 2));
  return 0;
}
