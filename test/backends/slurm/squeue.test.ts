// Reading squeue's output (a sample taken from SLURM 22.05 with squeueArgs' format) and SLURM's reasons.
import { describe, expect, it } from 'vitest';
import {
  isHeld,
  isLive,
  jobMarker,
  parseSqueue,
  squeueArgs,
  type SlurmJob,
} from '../../../src/backends/slurm/squeue.js';
import { endedText, pendingStatus, reasonText } from '../../../src/backends/slurm/reasons.js';

// Real output of `squeue ${squeueArgs('all')}` on the test cluster: a refused job (listed as FAILED), another
// user's oddly named job, two of this dispatcher's jobs (one reniced), one not ours.
const REAL =
  '4\u001fc-toobig\u001fFAILED\u001fBadConstraints\u001f4294901756\u001f0\u001f\u001f(null)\n' +
  '3\u001fweird|name with space\u001fPENDING\u001fResources\u001f4294901757\u001f0\u001f\u001fa|b c\n' +
  '5\u001fenvtest\u001fPENDING\u001fPriority\u001f4294901755\u001f0\u001f\u001f(null)\n' +
  '2\u001fc-0123456789abcdeg\u001fPENDING\u001fPriority\u001f4294901751\u001f7\u001f\u001fberth:slurm/default\n' +
  '1\u001fc-0123456789abcdef\u001fRUNNING\u001fNone\u001f4294901759\u001f0\u001fsmall\u001fberth:slurm/default\n';

describe('squeue', () => {
  it("lists this user's live jobs only in a pass, and named jobs in any state on demand", () => {
    const live = squeueArgs('live');
    expect(live).toContain('--me');
    expect(live).toContain('--noheader');
    const states = live
      .find((a) => a.startsWith('--states='))!
      .slice('--states='.length)
      .split(',');
    expect(states).toContain('PENDING');
    expect(states).toContain('RUNNING');
    expect(states).not.toContain('COMPLETING');
    expect(states).not.toContain('all');
    for (const s of states) expect(isLive({ state: s } as SlurmJob)).toBe(true);
    expect(squeueArgs({ ids: ['7', '9'] })).toEqual(
      expect.arrayContaining(['--me', '--states=all', '--jobs=7,9']),
    );
    // One id alone would make squeue fail for a job SLURM has forgotten.
    expect(squeueArgs({ ids: ['7'] })).toContain('--jobs=7,7');
    expect(squeueArgs('all')).toContain('--states=all');
  });

  it('parses real output, names and comments with | and spaces included', () => {
    const { jobs, bad } = parseSqueue(REAL);
    expect(bad).toEqual([]);
    expect(jobs).toHaveLength(5);
    expect(jobs[1]).toEqual({
      id: '3',
      name: 'weird|name with space',
      state: 'PENDING',
      reason: 'Resources',
      priority: 4294901757,
      nice: 0,
      nodes: '',
      comment: 'a|b c',
    });
    expect(jobs[3]).toMatchObject({ id: '2', nice: 7, comment: jobMarker('slurm/default') });
    expect(jobs[4]).toMatchObject({ id: '1', state: 'RUNNING', nodes: 'small' });
    expect(jobs[0]!.comment).toBe('');
  });

  it('reports lines it cannot read instead of dropping them silently', () => {
    const extra = REAL.split('\n')[1] + '\u001fmore';
    const { jobs, bad } = parseSqueue(
      `garbage line\n12\u001fx\u001fPENDING\n${REAL.split('\n')[0]}\n${extra}\n`,
    );
    expect(jobs).toHaveLength(1);
    expect(bad).toEqual(['garbage line', '12\u001fx\u001fPENDING', extra]);
  });

  it.each([
    ['PENDING', true],
    ['RUNNING', true],
    ['SUSPENDED', true],
    ['COMPLETING', false],
    ['COMPLETED', false],
    ['FAILED', false],
    ['NODE_FAIL', false],
    ['CANCELLED', false],
    ['TIMEOUT', false],
    ['OUT_OF_MEMORY', false],
  ])('%s is live: %s', (state, live) => {
    expect(
      isLive({ id: '1', name: 'c', state, reason: '', priority: 1, nice: 0, nodes: '', comment: '' }),
    ).toBe(live);
  });

  it('a pending job with priority 0 is held', () => {
    const job = {
      id: '1',
      name: 'c',
      state: 'PENDING',
      reason: 'BadConstraints',
      priority: 0,
      nice: 0,
      nodes: '',
      comment: '',
    };
    expect(isHeld(job)).toBe(true);
    expect(isHeld({ ...job, priority: 5 })).toBe(false);
    expect(isHeld({ ...job, state: 'RUNNING' })).toBe(false);
  });
});

describe('reasons in Berth words', () => {
  it.each([
    ['Priority', /higher priority are ahead/],
    ['Resources', /enough free CPUs/],
    ['BadConstraints', /can ever satisfy/],
    ['ReqNodeNotAvail, UnavailableNodes:big', /down, drained or reserved/],
    ['QOSMaxJobsPerUserLimit', /QOS limit/],
    ['AssocGrpCpuLimit', /account limit/],
    ['JobHeldAdmin', /administrator/],
    ['SomethingNew', /no further detail/],
  ])('%s', (reason, text) => {
    expect(reasonText(reason)).toMatch(text);
  });

  it('a pending status names the job and keeps SLURM’s own word', () => {
    expect(
      pendingStatus({
        id: '7',
        name: 'c',
        state: 'PENDING',
        reason: 'Priority',
        priority: 9,
        nice: 0,
        nodes: '',
        comment: '',
      }),
    ).toBe(
      "SLURM job 7 is pending: jobs of higher priority are ahead of it in SLURM's queue (SLURM reason: Priority)",
    );
  });

  it('says how a job ended, or that it is gone', () => {
    const job = {
      id: '7',
      name: 'c',
      state: 'NODE_FAIL',
      reason: 'NodeDown',
      priority: 0,
      nice: 0,
      nodes: 'big',
      comment: '',
    };
    expect(endedText('c', '7', job)).toBe('SLURM job 7 ended: NODE_FAIL (NodeDown)');
    expect(endedText('c', '7', undefined)).toBe('SLURM job 7 is gone from squeue');
    expect(endedText('c', null, undefined)).toBe('no SLURM job named c is listed');
  });
});
