// Status texts for waiting containers (DESIGN §6.2 rule 7): why a container waits and what would change
// it. `berth why ID` prints these, so they are written for people, not parsed.

/** "; 3 higher-priority containers ahead", or "" when none are. */
export function aheadText(higherAhead: number): string {
  return higherAhead === 0
    ? ''
    : `; ${higherAhead} higher-priority container${higherAhead === 1 ? '' : 's'} ahead`;
}

export const statusText = {
  starting: (instance: string) => `starting on instance ${instance}`,
  assigned: (instance: string, state: string) =>
    `assigned to instance ${instance} (${state}); waiting for its agent to start it`,
  waitingExisting: (instance: string, state: string, type: string) =>
    `waiting for instance ${instance} (${state}, type ${type}) to become ready`,
  waitingNew: (type: string) => `waiting for a new ${type} instance (create requested)`,
  waitingFreeing: (instance: string) =>
    `waiting for instance ${instance} to free up: its running containers are expected to end before a new instance could boot (wait_for_running)`,
  bootBudget: (k: number) =>
    `waiting for room: its step already has new capacity booting for as much of its expected work as keeps each new vcpu busy ${k} boot times (boot_budget)`,
  // The next five follow the queue position ("queue position 5; ...").
  limit: (type: string, limit: string) =>
    `waits for a ${type} instance; ${limit}; starts when an instance is freed or the limit is raised`,
  behindHead: (type: string, limit: string, head: string) =>
    `waits for a ${type} instance; ${limit}; new instances go to container ${head} and others ahead first`,
  noType: (type: string, why: string) =>
    `waits for a ${type} instance; no eligible type can be created now: ${why}`,
  rateLimited: (type: string, limit: string) => `waits for a ${type} instance; ${limit}`,
  ownerFull: (why: string) => `waits for its owner's running containers to finish; ${why}`,
  unlockedForHigher: (instance: string, head: string, limit: string) =>
    `its place on instance ${instance} went to higher-priority container ${head} (${limit})`,
  priorityZero: 'priority is 0',
  notScheduled: 'not scheduled: priority is 0',
  cancelled: (reason: string) => `cancelled: ${reason}`,
  unlocked: (reason: string) => `unlocked: ${reason}`,
  dispatchAttempts: (count: number, max: number) =>
    `locked ${count} times without completing; max_dispatch_attempts=${max}`,
};

/**
 * What a status says a container waits for (the simulator's wait breakdown, src/sim/wait-causes.ts):
 * `boot` a new or booting instance; `budget` boot_budget held it back; `freeing` wait_for_running;
 * `limit` a limit, a missing type or its owner's cap; `start` its agent starting it on a ready instance;
 * `other` any other text.
 */
export const WAIT_CAUSES = ['boot', 'budget', 'freeing', 'limit', 'start', 'other'] as const;
export type WaitCause = (typeof WAIT_CAUSES)[number];

/** The cause of a status text: an own text, or a waiting reason (without its queue position). */
export function waitCause(text: string): WaitCause {
  if (
    text.startsWith('waiting for a new ') ||
    (text.startsWith('waiting for instance ') && text.endsWith('to become ready'))
  )
    return 'boot';
  if (text.endsWith('(boot_budget)')) return 'budget';
  if (text.endsWith('(wait_for_running)')) return 'freeing';
  if (text.startsWith('starting on ') || text.startsWith('assigned to ')) return 'start';
  if (text.startsWith('waits for ') || text.startsWith('unlocked: its place')) return 'limit';
  return 'other';
}
