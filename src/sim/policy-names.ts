// The simulator's policy names, apart from the policies themselves (which load the scheduler), for
// code that only validates or lists them.
export const POLICIES = ['berth', 'one-per-instance', 'fifo'] as const;
export type PolicyName = (typeof POLICIES)[number];

export function isPolicyName(s: string): s is PolicyName {
  return (POLICIES as readonly string[]).includes(s);
}
