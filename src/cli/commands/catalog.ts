// `berth catalog ec2 --prices FILE`: instance types for a dispatch config, from EC2's DescribeInstanceTypes
// and a price file (see src/cloud/ec2/catalog.ts and docs/AWS.md).
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parseSize } from '../../model/units.js';
import { UsageError } from '../errors.js';
import { table } from '../format.js';

interface CatalogFlags {
  prices?: string;
  region?: string;
  endpoint?: string;
  scratch: string;
  json?: boolean;
}

export function registerCatalog(program: Command): void {
  program
    .command('catalog')
    .description('build the instance_types of a dispatch config from a cloud API and a price file')
    .argument('<cloud>', 'ec2')
    .requiredOption(
      '--prices <file>',
      'JSON prices per hour: {"m5.large": {"on_demand": 0.096, "spot": 0.035}, …}',
    )
    .option('--region <region>', 'AWS region (default $AWS_REGION, else us-east-1)')
    .option('--endpoint <url>', 'EC2 API URL other than the region’s (an emulator)')
    .option('--scratch <size>', 'scratch (EBS) size of every type', '50GiB')
    .option('--json', 'print {"instance_types": [...]} for the dispatch config')
    .action(async (cloud: string, opts: CatalogFlags) => {
      if (cloud !== 'ec2')
        throw new UsageError(`catalog: expected the cloud "ec2", got ${JSON.stringify(cloud)}`);
      let scratch: number;
      try {
        scratch = parseSize(opts.scratch);
      } catch (err) {
        throw new UsageError(`--scratch: ${(err as Error).message}`);
      }
      const { CatalogInputError, buildCatalog, describeInstanceTypes, parsePriceFile } =
        await import('../../cloud/ec2/catalog.js');
      let prices;
      try {
        prices = parsePriceFile(JSON.parse(readFileSync(opts.prices!, 'utf8')), opts.prices);
      } catch (err) {
        throw new UsageError(`--prices: ${(err as Error).message}`);
      }
      process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
      const { EC2Client } = await import('@aws-sdk/client-ec2');
      const ec2 = new EC2Client({
        region: opts.region ?? process.env.AWS_REGION ?? 'us-east-1',
        ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
      });
      try {
        let infos;
        try {
          infos = await describeInstanceTypes(ec2);
        } catch (err) {
          const { classifyEc2Error } = await import('../../cloud/ec2/errors.js');
          const f = classifyEc2Error(err);
          throw new UsageError(`EC2 DescribeInstanceTypes failed (${f.code}): ${f.message}`, 1);
        }
        let entries;
        try {
          entries = buildCatalog(infos, prices, scratch);
        } catch (err) {
          if (err instanceof CatalogInputError) throw new UsageError(err.message);
          throw err;
        }
        if (opts.json) console.log(JSON.stringify({ instance_types: entries }, null, 2));
        else
          console.log(
            table(
              ['NAME', 'EC2 TYPE', 'VCPUS', 'RAM', 'GPUS', 'PRICE/H', 'SPOT'],
              entries.map((e) => [
                e.name,
                e.provider_type,
                String(e.vcpus),
                e.ram,
                String(e.gpus),
                String(e.price),
                e.preemptible ? 'yes' : '',
              ]),
            ),
          );
      } finally {
        ec2.destroy();
      }
    });
}
