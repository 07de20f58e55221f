// The ec2 driver against real AWS, opt in: BERTH_EC2_LIVE=1 with AWS credentials in the environment (or a
// profile) and BERTH_EC2_LIVE_CONFIG=FILE, the `ec2` section of a dispatch config (region, subnets, ami, …;
// docs/AWS.md). Creates one small instance (BERTH_EC2_LIVE_TYPE, default t3.micro), lists it by its tags,
// destroys it and waits until it is gone. Everywhere else it is reported as skipped with that reason; it is
// named "[live] …" so that `scripts/test.mjs` counts it as an opt-in test, not as a failure under
// BERTH_REQUIRE_ALL=1.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { parseEc2Config } from '../../src/cloud/ec2/config.js';
import { Ec2Driver } from '../../src/cloud/ec2/driver.js';
import { until } from '../helpers/cli.js';
import { ec2type } from './ec2-helpers.js';

const live = process.env.BERTH_EC2_LIVE === '1';
const why = live
  ? ''
  : ' [skipped: opt-in, set BERTH_EC2_LIVE=1 and BERTH_EC2_LIVE_CONFIG with AWS credentials]';
let driver: Ec2Driver | null = null;
let made: string | null = null;

afterAll(async () => {
  if (driver && made) await driver.destroy(made).catch(() => {});
  driver?.close();
});

describe('ec2 driver on AWS', () => {
  it.skipIf(!live)(
    `[live] creates, lists and destroys one small instance${why}`,
    { timeout: 600_000 },
    async () => {
      const cfg = parseEc2Config(JSON.parse(readFileSync(process.env.BERTH_EC2_LIVE_CONFIG ?? '', 'utf8')));
      driver = new Ec2Driver({ config: cfg });
      const tag = `live-${randomBytes(4).toString('hex')}`;
      const nodeId = `n-live${randomBytes(6).toString('hex')}`;
      const type = ec2type('live', process.env.BERTH_EC2_LIVE_TYPE ?? 't3.micro');
      const tags = { 'berth-cluster': 'berth-live-test', 'berth-tag': tag, 'berth-node': nodeId };
      const ci = await driver.create(
        type,
        tags,
        JSON.stringify({ api_url: 'http://127.0.0.1:9', node_id: nodeId, bootstrap_secret: 'unused' }),
      );
      made = ci.id;
      expect(ci.providerType).toBe(type.providerType);
      const listed = await until(
        async () => (await driver!.list({ 'berth-tag': tag })).find((i) => i.id === ci.id),
        120_000,
        `${ci.id} in the list`,
      );
      expect(listed.tags).toMatchObject(tags);
      await driver.destroy(ci.id);
      await until(
        async () => !(await driver!.list({ 'berth-tag': tag })).some((i) => i.id === ci.id),
        300_000,
        `${ci.id} gone`,
      );
      made = null;
    },
  );
});
