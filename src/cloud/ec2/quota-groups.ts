// EC2's vCPU quotas are per group of instance families and per purchase option ("Running On-Demand
// Standard (A, C, D, H, I, M, R, T, Z) instances", "All G and VT Spot Instance Requests", …): a quota
// error for m5.large says nothing about g5.xlarge. This maps a provider type to its quota group.

/** Families with a quota of their own; every other family counts as "standard". */
const GROUPS: [RegExp, string][] = [
  [/^(g|vt)\d/, 'g-vt'],
  [/^inf\d/, 'inf'],
  [/^trn\d/, 'trn'],
  [/^dl\d/, 'dl'],
  [/^hpc\d/, 'hpc'],
  [/^f\d/, 'f'],
  [/^p\d/, 'p'],
  [/^x\d/, 'x'],
  [/^u-/, 'high-memory'],
  [/^mac\d/, 'mac'],
];

/** The quota group of an EC2 instance type, e.g. "on-demand/standard" for m5.large, "spot/g-vt" for spot g5. */
export function quotaGroup(providerType: string, spot: boolean): string {
  const family = providerType.toLowerCase();
  const group = GROUPS.find(([re]) => re.test(family))?.[1] ?? 'standard';
  return `${spot ? 'spot' : 'on-demand'}/${group}`;
}
