// The cgroup layer (cgroup.ts) on this host's real cgroups: the cases of cgroup-cases.ts that apply to its
// version. The same cases run in a cgroup v2 guest (test/guest/).
import { describe } from 'vitest';
import { probeCgroups } from '../../src/agent/runtimes/cgroup.js';
import { itIf } from '../helpers/needs.js';
import { CGROUP_CASES } from './cgroup-cases.js';
import { isRoot } from './helpers.js';

const host = await probeCgroups();
const it = itIf(!isRoot ? 'not root: creating cgroups needs root' : host.unusable);

describe(`cgroup v${host.version ?? '?'} layer`, () => {
  for (const c of CGROUP_CASES)
    if (!c.versions || (host.version !== null && c.versions.includes(host.version)))
      it(c.name, () => c.run().then(() => {}));
});
