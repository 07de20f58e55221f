// Statuses by group (SEAMS §3, migration 060) on both queues: setWaiting stores the waiting containers
// by slot, setStatuses the others' own texts; the text read is queuedText's for a member of a live group,
// else the container's own text.
import { describe, expect, it } from 'vitest';
import { queuedText } from '../../src/dispatch/scheduler/statuses.js';
import { SUBJECTS } from './subjects.js';

const D = 'c/t';

describe.each(SUBJECTS)('statuses by group on the %s queue', (_name, make) => {
  it('group texts with positions, own texts, a slot reused for a new reason, a gone slot', async () => {
    const s = await make();
    const ids = await Promise.all([1, 2, 3].map(async () => s.current(await s.submit())));
    const [a, b, c] = ids as [string, string, string];
    await s.queue.setWaiting(
      D,
      [
        { slot: 0, reason: 'r0', members: [a, b], positions: [1, 2], higherAhead: [0, 1] },
        { slot: 1, reason: 'r1', members: [c], positions: [3], higherAhead: [4] },
      ],
      [0, 1],
    );
    expect(await Promise.all(ids.map((id) => s.status(id)))).toEqual([
      queuedText(1, 0, 'r0'),
      queuedText(2, 1, 'r0'),
      queuedText(3, 4, 'r1'),
    ]);
    // The head is placed (own text); slot 0 now holds b under a new reason; slot 1 is gone.
    await s.queue.setStatuses(new Map([[a, 'starting on instance i-1']]));
    await s.queue.setWaiting(
      D,
      [{ slot: 0, reason: 'r2', members: [b], positions: [1], higherAhead: [0] }],
      [0],
    );
    expect(await Promise.all(ids.map((id) => s.status(id)))).toEqual([
      'starting on instance i-1',
      queuedText(1, 0, 'r2'),
      null,
    ]);
  });
});
