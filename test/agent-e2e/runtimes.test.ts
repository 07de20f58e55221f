// The agent with each image runtime that works here (skipped with the reason where one does not):
// output and exit code pass through; an image that does not exist is cancelled perm.
import { describe, expect } from 'vitest';
import { createRuntime, type RuntimeName } from '../../src/agent/runtimes/detect.js';
import { itIf } from '../helpers/needs.js';
import { TEST_IMAGE, TEST_ROOTFS_TAR, rootfsMissing } from '../agent/helpers.js';
import { Harness } from './harness.js';

const ids: string[] = [];
const h = Harness.forFile(ids);

const cases: { name: RuntimeName; image: string }[] = [
  { name: 'runc', image: TEST_ROOTFS_TAR },
  { name: 'docker', image: TEST_IMAGE },
  { name: 'podman', image: TEST_ROOTFS_TAR },
];

for (const { name, image } of cases) {
  const missing = (await createRuntime(name).available()) ?? rootfsMissing();
  describe(`agent with the ${name} runtime`, () => {
    itIf(missing)(
      'runs an image: output and exit code pass through; a missing image (the request ends after one attempt) or one no registry gives is cancelled perm',
      async () => {
        const node = await h.node();
        h.startAgent(node, { runtime: name });
        const ok = await h.submitAndAssign(node, {
          image,
          command: ['sh', '-c', 'echo out; echo err >&2; exit 5'],
        });
        ids.push(ok);
        const c = await h.waitState(ok, ['Complete', 'Cancelled'], 60_000);
        expect(c).toMatchObject({ state: 'Complete', exit_code: 5 });
        expect(await h.text(ok, 'stdout')).toBe('out\n');
        expect(await h.text(ok, 'stderr')).toBe('err\n');

        const bad = await h.submitAndAssign(node, {
          image: '/nonexistent/berth-rootfs.tar',
          command: ['true'],
          container_count_max: 3,
        });
        ids.push(bad);
        const b = await h.waitState(bad, ['Complete', 'Cancelled'], 60_000);
        expect(b).toMatchObject({ state: 'Cancelled', failure_class: 'perm' });
        expect(b.runtime_status).toMatch(/nonexistent/);
        // Not retryable: the request ends after this one attempt, though two more were allowed.
        const req = await h.store.requests.get(b.request_id);
        expect(req).toMatchObject({ state: 'Final', outcome: 'failed', attempts: 1 });
        expect(req.final_reason).toMatch(/\(not retryable\)$/);

        if (name === 'runc') return; // runc runs tarballs only: a name is refused as above
        // A name no registry here has (none is reachable): perm within seconds, not temp for minutes.
        const t0 = Date.now();
        const gone = await h.submitAndAssign(node, { image: 'doesnotexist/nope:1.0', command: ['true'] });
        ids.push(gone);
        const g = await h.waitState(gone, ['Complete', 'Cancelled'], 60_000);
        expect(g).toMatchObject({ state: 'Cancelled', failure_class: 'perm' });
        expect(g.runtime_status).toMatch(/the pull failed \d times|did not resolve/);
        expect(Date.now() - t0).toBeLessThan(30_000);
      },
      120_000,
    );
  });
}

// The vm runtime, chosen by name: every container, with or without an image, runs in its own guest.
const vmMissing = (await createRuntime('vm').available()) ?? (process.getuid?.() === 0 ? null : 'not root');
describe('agent with the vm runtime', () => {
  itIf(vmMissing)(
    'runs an image-less container in a guest: output and exit code pass through',
    async () => {
      const node = await h.node();
      const { lines } = h.startAgent(node, { runtime: 'vm' });
      const id = await h.submitAndAssign(node, {
        command: ['sh', '-c', 'echo "out $(hostname)"; echo err >&2; exit 5'],
      });
      ids.push(id);
      // The first start of a machine shape boots a guest (seconds; tens of seconds on a loaded host).
      const c = await h.waitState(id, ['Complete', 'Cancelled'], 300_000);
      expect(c, lines.join('\n')).toMatchObject({ state: 'Complete', exit_code: 5 });
      expect(await h.text(id, 'stdout')).toBe('out berth-guest\n');
      expect(await h.text(id, 'stderr')).toBe('err\n');
    },
    400_000,
  );
});
