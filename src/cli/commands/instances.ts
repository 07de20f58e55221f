// `berth instances` and `berth instance hold [--freeze]|drain|run|kill ID` (admin).
import type { Command } from 'commander';
import type { InstanceRecord, InstanceRequested } from '../../store/instances.js';
import { clientFor } from '../client.js';
import { age, table } from '../format.js';

export function registerInstances(program: Command): void {
  program
    .command('instances')
    .description('list the instances the dispatchers run (admin)')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const res = await clientFor(cmd).request<{ items: InstanceRecord[] }>('GET', '/v1/instances');
      if (opts.json) return console.log(JSON.stringify(res, null, 2));
      const now = new Date();
      console.log(
        table(
          ['ID', 'TYPE', 'STATE', 'IDLE', 'CONTAINERS', 'PRICE/H', 'AGE', 'LAST PING'],
          res.items.map((i) => [
            i.id,
            i.type,
            i.state,
            i.requested_idle_behavior ? `${i.idle_behavior}→${i.requested_idle_behavior}` : i.idle_behavior,
            String(i.containers),
            i.price.toFixed(3),
            age(i.created_at, now),
            i.last_ping_at ? `${age(i.last_ping_at, now)} ago` : '-',
          ]),
        ),
      );
    });
  const instance = program.command('instance').description('change what an instance does (admin)');
  const actions: [string, string][] = [
    ['hold', 'no new work and never shut down'],
    ['drain', 'no new work; shut down when empty (resumes what a hold --freeze froze)'],
    ['run', 'normal: take work, shut down when idle (resumes what a hold --freeze froze)'],
    ['kill', 'shut down now (its containers are retried elsewhere)'],
  ];
  for (const [action, help] of actions) {
    const c = instance
      .command(action)
      .description(help)
      .argument('<id>', 'instance id (see berth instances)')
      .option('--json', 'print the instance as JSON (with frozen and resumed: the containers asked)');
    if (action === 'hold')
      c.option('--freeze', 'also freeze its running containers (berth instance run or drain resumes them)');
    c.action(async (id: string, o: { json?: boolean; freeze?: boolean }, cmd: Command) => {
      const i = await clientFor(cmd).request<InstanceRequested>(
        'POST',
        `/v1/instances/${encodeURIComponent(id)}/${action}`,
        o.freeze ? { freeze: true } : {},
      );
      if (o.json) return console.log(JSON.stringify(i, null, 2));
      const asked = [
        ...(i.frozen.length ? [`freezing ${i.frozen.join(', ')}`] : []),
        ...(i.resumed.length ? [`resuming ${i.resumed.join(', ')}`] : []),
      ];
      console.log(
        `${i.id}: ${action}${o.freeze ? ' --freeze' : ''} requested (applied at the dispatcher's next pass)` +
          asked.map((a) => `; ${a}`).join(''),
      );
    });
  }
}
