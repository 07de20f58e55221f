// The `ec2` section of a dispatch config: where and how the ec2 driver creates instances. Every key is
// declared once in EC2_KEYS (type, default, help; docs/CONFIG.md and docs/AWS.md show them) and validated
// here; an error names the key and what was expected, and nothing is used from a config that fails.
import { parseDuration, parseSize, UnitError } from '../../model/units.js';

/** Where `berth` comes from on a new instance (see user-data.ts). */
export type AgentInstall =
  | { kind: 'npm'; spec: string }
  | { kind: 'tarball'; url: string }
  | { kind: 'preinstalled'; command: string };

export interface Ec2Config {
  region: string;
  /** An EC2 API endpoint other than AWS's (the emulator, a VPC endpoint); null: the region's. */
  endpoint: string | null;
  /** Subnets in fallback order: a capacity error in one moves the create on to the next. */
  subnets: string[];
  securityGroups: string[];
  /** IAM instance profile: a name, or an ARN (arn:...). */
  iamInstanceProfile: string | null;
  /** The AMI for every type without an entry in amiByType. */
  ami: string | null;
  /** AMI per Berth type name or provider type (e.g. a GPU image for GPU types). */
  amiByType: Record<string, string>;
  keyName: string | null;
  rootVolumeBytes: number;
  rootDevice: string;
  volumeType: string;
  /** Device name of the scratch EBS volume, sized from the type's scratch (none when the type has 0). */
  scratchDevice: string;
  encryptedVolumes: boolean;
  /** Extra tags on instances and volumes (cost allocation). */
  tags: Record<string, string>;
  /** Highest spot price per hour; null: up to the on-demand price (AWS's default). */
  spotMaxPrice: number | null;
  agentInstall: AgentInstall;
  /** Extra `berth agent` flags, e.g. ["--runtime", "docker"]. */
  agentArgs: string[];
  /** The agent's work directory on the instance (the scratch volume is mounted here). */
  workDir: string;
  /** The instance metadata service's base URL (IMDSv2). */
  imdsUrl: string;
  /** How long a subnet that had no capacity for a type is tried last for that type. */
  capacityTtlMs: number;
  /** Attempts of one create (same ClientToken) after timeouts and 5xx errors other than capacity. */
  createAttempts: number;
  /** Timeout of one EC2 API call. */
  requestTimeoutMs: number;
  /** DescribeInstances page size (5–1000). */
  pageSize: number;
}

export class Ec2ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Ec2ConfigError';
  }
}

/** The keys of the `ec2` section with their defaults and meaning. */
export const EC2_KEYS: { key: string; default: string; help: string }[] = [
  { key: 'region', default: '$AWS_REGION, else us-east-1', help: 'AWS region.' },
  {
    key: 'endpoint',
    default: 'none',
    help: "EC2 API URL other than the region's (an emulator such as `berth up --cloud ec2-emulated`'s, a VPC endpoint).",
  },
  {
    key: 'subnets',
    default: '(required)',
    help: 'Subnet ids in fallback order; a capacity error in one zone moves the create to the next.',
  },
  { key: 'security_groups', default: '[]', help: 'Security group ids for every instance.' },
  { key: 'iam_instance_profile', default: 'none', help: 'IAM instance profile name or ARN.' },
  { key: 'ami', default: 'none', help: 'AMI id for every type without an `ami_by_type` entry.' },
  { key: 'ami_by_type', default: '{}', help: 'AMI per Berth type name or provider type.' },
  { key: 'key_name', default: 'none', help: 'EC2 key pair name (SSH access).' },
  { key: 'root_volume', default: '20GiB', help: 'Root EBS volume size.' },
  { key: 'root_device', default: '/dev/xvda', help: "The AMI's root device name." },
  { key: 'volume_type', default: 'gp3', help: 'EBS volume type of the root and scratch volumes.' },
  {
    key: 'scratch_device',
    default: '/dev/sdb',
    help: "Device of the scratch EBS volume sized from the type's `scratch` (none when it is 0).",
  },
  { key: 'encrypted_volumes', default: 'true', help: 'Encrypt the EBS volumes.' },
  { key: 'tags', default: '{}', help: 'Extra tags on instances and volumes (cost allocation).' },
  {
    key: 'spot_max_price',
    default: 'none (the on-demand price)',
    help: 'Highest spot price per hour for preemptible types.',
  },
  {
    key: 'agent_install',
    default: '{"preinstalled": "berth"}',
    help: 'Where the agent comes from: {"npm": "berth@VERSION"}, {"tarball": "https://…/berth.tgz"} or {"preinstalled": "COMMAND"}.',
  },
  { key: 'agent_args', default: '[]', help: 'Extra `berth agent` flags, e.g. ["--runtime", "docker"].' },
  { key: 'work_dir', default: '/var/lib/berth', help: "The agent's work directory on the instance." },
  {
    key: 'imds_url',
    default: 'http://169.254.169.254',
    help: 'Instance metadata service (IMDSv2) base URL as the instance sees it.',
  },
  {
    key: 'capacity_ttl',
    default: '60s',
    help: 'A subnet that had no capacity for a type is tried last for that type for this long.',
  },
  {
    key: 'create_attempts',
    default: '3',
    help: 'Attempts of one create (same ClientToken: never two instances) after timeouts and 5xx errors.',
  },
  { key: 'request_timeout', default: '30s', help: 'Timeout of one EC2 API call.' },
  { key: 'page_size', default: '1000', help: 'DescribeInstances page size (5 to 1000).' },
];

const KNOWN = new Set(EC2_KEYS.map((k) => k.key));

/** Parses the `ec2` section; `at` prefixes every error (e.g. "dispatch.json: ec2"). */
export function parseEc2Config(value: unknown, at = 'ec2'): Ec2Config {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Ec2ConfigError(`${at}: expected an object such as {"subnets": ["subnet-…"], "ami": "ami-…"}`);
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!KNOWN.has(k)) throw new Ec2ConfigError(`${at}.${k}: unknown key (known: ${[...KNOWN].join(', ')})`);
  const fail = (k: string, expected: string): never => {
    throw new Ec2ConfigError(`${at}.${k}: expected ${expected}, got ${JSON.stringify(o[k])}`);
  };
  const str = (k: string, dflt: string | null, re?: RegExp): string | null => {
    const v = o[k] ?? dflt;
    if (v === null) return null;
    if (typeof v !== 'string' || v === '' || (re && !re.test(v)))
      fail(k, re ? `a string matching ${re.source}` : 'a non-empty string');
    return v as string;
  };
  const strList = (k: string, re: RegExp): string[] => {
    const v = o[k] ?? [];
    if (!Array.isArray(v) || v.some((s) => typeof s !== 'string' || !re.test(s)))
      fail(k, `a list of ids matching ${re.source}`);
    return v as string[];
  };
  const strMap = (k: string): Record<string, string> => {
    const v = o[k] ?? {};
    if (
      typeof v !== 'object' ||
      v === null ||
      Array.isArray(v) ||
      Object.values(v).some((s) => typeof s !== 'string' || s === '')
    )
      fail(k, 'an object of strings');
    return { ...(v as Record<string, string>) };
  };
  const unit = <T>(k: string, parse: (v: unknown) => T, dflt: unknown): T => {
    try {
      return parse(o[k] ?? dflt);
    } catch (err) {
      if (err instanceof UnitError) return fail(k, err.expected);
      throw err;
    }
  };
  const int = (k: string, dflt: number, min: number, max: number): number => {
    const v = o[k] ?? dflt;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
      fail(k, `a whole number from ${min} to ${max}`);
    return v as number;
  };

  const subnets = strList('subnets', /^subnet-[0-9a-z]+$/);
  if (subnets.length === 0) fail('subnets', 'at least one subnet id such as "subnet-0abc"');
  if (new Set(subnets).size !== subnets.length) fail('subnets', 'distinct subnet ids');
  const ami = str('ami', null, /^ami-[0-9a-z]+$/);
  const amiByType = strMap('ami_by_type');
  for (const [t, id] of Object.entries(amiByType))
    if (!/^ami-[0-9a-z]+$/.test(id))
      throw new Ec2ConfigError(
        `${at}.ami_by_type.${t}: expected an AMI id such as "ami-0abc", got ${JSON.stringify(id)}`,
      );
  const tags = strMap('tags');
  for (const k of Object.keys(tags))
    if (k.startsWith('berth-') || k.startsWith('aws:'))
      throw new Ec2ConfigError(`${at}.tags.${k}: the berth- and aws: prefixes are reserved`);
  const encrypted = o.encrypted_volumes ?? true;
  if (typeof encrypted !== 'boolean') fail('encrypted_volumes', 'true or false');
  const spotMaxPrice = o.spot_max_price ?? null;
  if (spotMaxPrice !== null && (typeof spotMaxPrice !== 'number' || !(spotMaxPrice > 0)))
    fail('spot_max_price', 'a price per hour above 0, or null');
  const agentArgs = o.agent_args ?? [];
  if (!Array.isArray(agentArgs) || agentArgs.some((a) => typeof a !== 'string'))
    fail('agent_args', 'a list of strings');
  const imdsUrl = str('imds_url', 'http://169.254.169.254', /^https?:\/\/[^\s'"`$\\]+$/)!;
  const endpoint = str('endpoint', null, /^https?:\/\/[^\s]+$/);
  const workDir = str('work_dir', '/var/lib/berth', /^\/[A-Za-z0-9._/-]*$/)!;
  const rootVolumeBytes = unit('root_volume', parseSize, '20GiB');
  if (rootVolumeBytes < 1024 ** 3) fail('root_volume', 'at least 1GiB');
  return {
    region: str('region', process.env.AWS_REGION ?? 'us-east-1', /^[a-z]{2}(-[a-z]+)+-\d+$/)!,
    endpoint,
    subnets,
    securityGroups: strList('security_groups', /^sg-[0-9a-z]+$/),
    iamInstanceProfile: str('iam_instance_profile', null, /^[\w+=,.@:/-]+$/),
    ami,
    amiByType,
    keyName: str('key_name', null),
    rootVolumeBytes,
    rootDevice: str('root_device', '/dev/xvda', /^\/dev\/[a-z0-9]+$/)!,
    volumeType: str('volume_type', 'gp3', /^(gp2|gp3|io1|io2|st1|sc1|standard)$/)!,
    scratchDevice: str('scratch_device', '/dev/sdb', /^\/dev\/[a-z0-9]+$/)!,
    encryptedVolumes: encrypted as boolean,
    tags,
    spotMaxPrice: spotMaxPrice as number | null,
    agentInstall: parseAgentInstall(o.agent_install, `${at}.agent_install`),
    agentArgs: agentArgs as string[],
    workDir,
    imdsUrl,
    capacityTtlMs: unit('capacity_ttl', parseDuration, '60s'),
    createAttempts: int('create_attempts', 3, 1, 10),
    requestTimeoutMs: unit('request_timeout', parseDuration, '30s'),
    pageSize: int('page_size', 1000, 5, 1000),
  };
}

function parseAgentInstall(v: unknown, at: string): AgentInstall {
  if (v === undefined) return { kind: 'preinstalled', command: 'berth' };
  const expected =
    'one of {"npm": "berth@VERSION"}, {"tarball": "https://…/berth.tgz"}, {"preinstalled": "COMMAND"}';
  if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.keys(v).length !== 1)
    throw new Ec2ConfigError(`${at}: expected ${expected}, got ${JSON.stringify(v)}`);
  const [kind, arg] = Object.entries(v)[0]!;
  // These go into a shell script: accept only characters that need no quoting thought (and spaces in a
  // preinstalled command such as "node /opt/berth/bin/berth.js", which the script splits into words).
  const safe =
    kind === 'preinstalled'
      ? /^[A-Za-z0-9@:/._+=,~%-]+( [A-Za-z0-9@:/._+=,~%-]+)*$/
      : /^[A-Za-z0-9@:/._+=,~%-]+$/;
  if (typeof arg !== 'string' || !safe.test(arg))
    throw new Ec2ConfigError(
      `${at}.${kind}: expected a string of letters, digits and @:/._+=,~%-${kind === 'preinstalled' ? ' (words separated by spaces)' : ''}, got ${JSON.stringify(arg)}`,
    );
  if (kind === 'npm') return { kind, spec: arg };
  if (kind === 'tarball') {
    if (!/^https?:\/\//.test(arg))
      throw new Ec2ConfigError(`${at}.tarball: expected an http(s) URL, got ${JSON.stringify(arg)}`);
    return { kind, url: arg };
  }
  if (kind === 'preinstalled') return { kind, command: arg };
  throw new Ec2ConfigError(`${at}: unknown source ${JSON.stringify(kind)}; expected ${expected}`);
}

/** The AMI for a type: by Berth name, then by provider type, then the global one. */
export function amiFor(cfg: Ec2Config, type: { name: string; providerType: string }): string | null {
  return cfg.amiByType[type.name] ?? cfg.amiByType[type.providerType] ?? cfg.ami;
}
