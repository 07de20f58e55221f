// podman's k8s-file log lines, which the podman runtime decodes itself (podman logs --follow skips lines).
import { describe, expect, it } from 'vitest';
import { parseK8sLine } from '../../src/agent/runtimes/podman.js';

describe('parseK8sLine', () => {
  it.each([
    ['2026-11-22T01:01:36.922467335+00:00 stdout F out', { stream: 'stdout', data: 'out\n' }],
    ['2026-11-22T01:01:36.923368546+00:00 stdout P partial', { stream: 'stdout', data: 'partial' }],
    [
      '2026-11-22T01:01:36.923379412+00:00 stderr F two  spaces ',
      { stream: 'stderr', data: 'two  spaces \n' },
    ],
    ['2026-11-22T01:01:36.923379412+00:00 stdout F ', { stream: 'stdout', data: '\n' }],
    ['2026-11-22T01:01:36.923379412+00:00 stdout F', { stream: 'stdout', data: '\n' }],
    ['2026-11-22T01:01:36.923379412+00:00 other F x', null],
    ['garbage', null],
  ])('%j', (line, want) => {
    expect(parseK8sLine(line)).toEqual(want);
  });
});
