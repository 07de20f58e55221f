// `berth pause ID` / `berth resume ID`: freeze a running container where it stands, and let it run on
// (a request id means its current container). Paused is a flag on a Running container, not a state
// (src/store/pause.ts): `ps` and `show` print it beside the state.
import type { Command } from 'commander';
import type { ContainerRecord } from '../../store/records.js';
import { clientFor } from '../client.js';
import { containerOf } from './logs.js';

/**
 * How a Running container's pause reads: "paused" once its agent froze it, "pausing"/"resuming" while the
 * agent has not done what was asked yet; null when it runs normally (or is not Running).
 */
export function pauseWord(c: Pick<ContainerRecord, 'state' | 'pause_wanted' | 'paused'>): string | null {
  if (c.state !== 'Running') return null;
  if (c.paused) return c.pause_wanted ? 'paused' : 'resuming';
  return c.pause_wanted ? 'pausing' : null;
}

export function registerPause(program: Command): void {
  for (const [verb, what] of [
    ['pause', 'freeze a running container where it stands (it keeps its memory and its instance)'],
    ['resume', 'let a paused container run on'],
  ] as const)
    program
      .command(verb)
      .description(`${what}; a request id (r-…) means its current container`)
      .argument('<id>', 'container (c-…) or request (r-…) id')
      .option('--json', 'print the container as JSON')
      .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
        const client = clientFor(cmd);
        const cid = await containerOf(client, id);
        const c = await client.request<ContainerRecord>('POST', `/v1/containers/${cid}/${verb}`);
        if (opts.json) return console.log(JSON.stringify(c, null, 2));
        console.log(`${c.id}: ${c.state} (${pauseWord(c) ?? 'running'})`);
      });
}
