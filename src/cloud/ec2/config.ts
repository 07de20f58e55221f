// The `ec2` section of a dispatch config: where and how the ec2 driver creates instances, declared with
// the mechanism of every option (src/config/declare.ts; docs/CONFIG.md lists the keys, docs/AWS.md
// explains them). An error names the key and what was expected, and nothing is used from a config that
// fails.
import { at, ConfigError, listOf, mapOf, opt, section, type Infer } from '../../config/declare.js';
import {
  bool,
  duration,
  Expected,
  int,
  nullable,
  num,
  oneOf,
  size,
  text,
  type Kind,
} from '../../config/kinds.js';

/** Where `berth` comes from on a new instance (see user-data.ts). */
export type AgentInstall =
  | { kind: 'npm'; spec: string }
  | { kind: 'tarball'; url: string }
  | { kind: 'preinstalled'; command: string };

const AMI = text('an AMI id such as "ami-0abc"', /^ami-[0-9a-z]+$/, '<ami>');
const DEVICE = text('a device such as /dev/sdb', /^\/dev\/[a-z0-9]+$/, '<device>');

/** A list of ids matching `re`, distinct; at least one when `nonEmpty`. */
function ids(example: string, re: RegExp, nonEmpty: boolean): Kind<string[]> {
  const list = listOf(text(`an id such as "${example}"`, re, '<id>'));
  return {
    ...list,
    parse(v, path, ctx) {
      const out = list.parse(v, path, ctx);
      if (nonEmpty && out.length === 0) throw new Expected(`at least one id such as "${example}"`);
      if (new Set(out).size !== out.length) throw new Expected('distinct ids');
      return out;
    },
  };
}

/** Tags for instances and volumes: strings, none with a prefix Berth or AWS reserves. */
const userTags: Kind<Record<string, string>> = {
  ...mapOf(text('a non-empty string')),
  parse(v, path, ctx) {
    const tags = mapOf(text('a non-empty string')).parse(v, path, ctx);
    for (const k of Object.keys(tags))
      if (k.startsWith('berth-') || k.startsWith('aws:'))
        throw new ConfigError(at(path, k), 'the berth- and aws: prefixes are reserved');
    return tags;
  },
};

/** A size of at least 1GiB. */
const volumeSize: Kind<number> = {
  ...size,
  parse(v, path, ctx) {
    const bytes = size.parse(v, path, ctx);
    if (bytes < 1024 ** 3) throw new Expected('a size of at least 1GiB');
    return bytes;
  },
};

const INSTALL_EXPECTED =
  'one of {"npm": "berth@VERSION"}, {"tarball": "https://…/berth.tgz"}, {"preinstalled": "COMMAND"}';

/** {"npm": SPEC} | {"tarball": URL} | {"preinstalled": COMMAND}. */
const agentInstall: Kind<AgentInstall> = {
  type: '{npm: SPEC} | {tarball: URL} | {preinstalled: COMMAND}',
  placeholder: '<json>',
  parse(v, path) {
    if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.keys(v).length !== 1)
      throw new Expected(INSTALL_EXPECTED);
    const [kind, arg] = Object.entries(v)[0]!;
    const p = at(path, kind);
    // These go into a shell script: accept only characters that need no quoting thought (and spaces in a
    // preinstalled command such as "node /opt/berth/bin/berth.js", which the script splits into words).
    const safe =
      kind === 'preinstalled'
        ? /^[A-Za-z0-9@:/._+=,~%-]+( [A-Za-z0-9@:/._+=,~%-]+)*$/
        : /^[A-Za-z0-9@:/._+=,~%-]+$/;
    if (kind !== 'npm' && kind !== 'tarball' && kind !== 'preinstalled')
      throw new ConfigError(path, `unknown source ${JSON.stringify(kind)}; expected ${INSTALL_EXPECTED}`);
    if (typeof arg !== 'string' || !safe.test(arg))
      throw new ConfigError(
        p,
        `expected a string of letters, digits and @:/._+=,~%-${kind === 'preinstalled' ? ' (words separated by spaces)' : ''}, got ${JSON.stringify(arg)}`,
      );
    if (kind === 'npm') return { kind, spec: arg };
    if (kind === 'tarball') {
      if (!/^https?:\/\//.test(arg))
        throw new ConfigError(p, `expected an http(s) URL, got ${JSON.stringify(arg)}`);
      return { kind, url: arg };
    }
    return { kind, command: arg };
  },
};

/** The keys of the `ec2` section. */
export const EC2_OPTIONS = section([
  opt({
    key: 'region',
    kind: text('an AWS region such as us-east-1', /^[a-z]{2}(-[a-z]+)+-\d+$/, '<region>'),
    default: () => process.env.AWS_REGION ?? 'us-east-1',
    defaultText: '$AWS_REGION, else `us-east-1`',
    help: 'AWS region.',
  }),
  opt({
    key: 'endpoint',
    kind: nullable(text('an http(s) URL', /^https?:\/\/\S+$/, '<url>')),
    default: null,
    help: "EC2 API URL other than the region's (an emulator such as `berth up --cloud ec2-emulated`'s, a VPC endpoint).",
  }),
  opt({
    key: 'subnets',
    kind: ids('subnet-0abc', /^subnet-[0-9a-z]+$/, true),
    help: 'Subnet ids in fallback order; a capacity error in one zone moves the create to the next.',
  }),
  opt({
    key: 'security_groups',
    field: 'securityGroups',
    kind: ids('sg-0abc', /^sg-[0-9a-z]+$/, false),
    default: [],
    help: 'Security group ids for every instance.',
  }),
  opt({
    key: 'iam_instance_profile',
    field: 'iamInstanceProfile',
    kind: nullable(text('an instance profile name or ARN', /^[\w+=,.@:/-]+$/)),
    default: null,
    help: 'IAM instance profile name or ARN.',
  }),
  opt({
    key: 'ami',
    kind: nullable(AMI),
    default: null,
    help: 'AMI id for every type without an `ami_by_type` entry.',
  }),
  opt({
    key: 'ami_by_type',
    field: 'amiByType',
    kind: mapOf(AMI),
    default: {},
    help: 'AMI per Berth type name or provider type.',
  }),
  opt({
    key: 'key_name',
    field: 'keyName',
    kind: nullable(text()),
    default: null,
    help: 'EC2 key pair name (SSH access).',
  }),
  opt({
    key: 'root_volume',
    field: 'rootVolumeBytes',
    kind: volumeSize,
    default: '20GiB',
    help: 'Root EBS volume size (at least 1GiB).',
  }),
  opt({
    key: 'root_device',
    field: 'rootDevice',
    kind: DEVICE,
    default: '/dev/xvda',
    help: "The AMI's root device name.",
  }),
  opt({
    key: 'volume_type',
    field: 'volumeType',
    kind: oneOf(['gp2', 'gp3', 'io1', 'io2', 'st1', 'sc1', 'standard']),
    default: 'gp3',
    help: 'EBS volume type of the root and scratch volumes.',
  }),
  opt({
    key: 'scratch_device',
    field: 'scratchDevice',
    kind: DEVICE,
    default: '/dev/sdb',
    help: "Device of the scratch EBS volume sized from the type's `scratch` (none when it is 0).",
  }),
  opt({
    key: 'encrypted_volumes',
    field: 'encryptedVolumes',
    kind: bool,
    default: true,
    help: 'Encrypt the EBS volumes.',
  }),
  opt({
    key: 'tags',
    kind: userTags,
    default: {},
    help: 'Extra tags on instances and volumes (cost allocation); the `berth-` and `aws:` prefixes are reserved.',
  }),
  opt({
    key: 'spot_max_price',
    field: 'spotMaxPrice',
    kind: nullable(num(0, { above: true, what: 'a price per hour above 0' })),
    default: null,
    defaultText: 'null (up to the on-demand price)',
    help: 'Highest spot price per hour for preemptible types.',
  }),
  opt({
    key: 'agent_install',
    field: 'agentInstall',
    kind: agentInstall,
    default: { preinstalled: 'berth' },
    help: 'Where the agent comes from: {"npm": "berth@VERSION"}, {"tarball": "https://…/berth.tgz"} or {"preinstalled": "COMMAND"}.',
  }),
  opt({
    key: 'agent_args',
    field: 'agentArgs',
    kind: listOf(text('a non-empty string')),
    default: [],
    help: 'Extra `berth agent` flags, e.g. ["--runtime", "docker"].',
  }),
  opt({
    key: 'work_dir',
    field: 'workDir',
    kind: text('an absolute path of letters, digits and ._/-', /^\/[A-Za-z0-9._/-]*$/, '<path>'),
    default: '/var/lib/berth',
    help: "The agent's work directory on the instance (the scratch volume is mounted here).",
  }),
  opt({
    key: 'imds_url',
    field: 'imdsUrl',
    kind: text('an http(s) URL without quotes, spaces or $', /^https?:\/\/[^\s'"`$\\]+$/, '<url>'),
    default: 'http://169.254.169.254',
    help: 'Instance metadata service (IMDSv2) base URL as the instance sees it.',
  }),
  opt({
    key: 'capacity_ttl',
    field: 'capacityTtlMs',
    kind: duration(),
    default: '60s',
    help: 'A subnet that had no capacity for a type is tried last for that type for this long.',
  }),
  opt({
    key: 'create_attempts',
    field: 'createAttempts',
    kind: int(1, 10),
    default: 3,
    help: 'Attempts of one create (same ClientToken: never two instances) after timeouts and 5xx errors other than capacity.',
  }),
  opt({
    key: 'request_timeout',
    field: 'requestTimeoutMs',
    kind: duration({ above0: true }),
    default: '30s',
    help: 'Timeout of one EC2 API call.',
  }),
  opt({
    key: 'page_size',
    field: 'pageSize',
    kind: int(5, 1000),
    default: 1000,
    help: 'DescribeInstances page size.',
  }),
]);

/** The compiled `ec2` section. */
export type Ec2Config = Infer<(typeof EC2_OPTIONS.options)[number]>;

/** Parses an `ec2` section on its own (tests, the bench, the live test); errors name `ec2.KEY`. */
export function parseEc2Config(value: unknown): Ec2Config {
  return EC2_OPTIONS.parse(value, 'ec2');
}

/** The AMI for a type: by Berth name, then by provider type, then the global one. */
export function amiFor(cfg: Ec2Config, type: { name: string; providerType: string }): string | null {
  return cfg.amiByType[type.name] ?? cfg.amiByType[type.providerType] ?? cfg.ami;
}
