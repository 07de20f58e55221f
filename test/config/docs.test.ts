// docs/CONFIG.md is generated from the option declarations; this fails when an option was added or
// changed without running `npm run docs:config`.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configMarkdown } from '../../src/config/docs.js';
import { PROCESS_OPTIONS } from '../../src/config/options.js';
import { SCHEDULER_OPTIONS } from '../../src/config/scheduler.js';
import { DISPATCH_OPTIONS } from '../../src/dispatch/config.js';

const committed = readFileSync(new URL('../../docs/CONFIG.md', import.meta.url), 'utf8');

describe('docs/CONFIG.md', () => {
  it('is what the declarations produce (run `npm run docs:config` after changing an option)', () => {
    expect(committed).toBe(configMarkdown());
  });

  it('lists every option with its environment variable and flag', () => {
    for (const o of PROCESS_OPTIONS.options) {
      const row = committed.split('\n').find((l) => l.startsWith(`| \`${o.key}\` |`));
      expect(row, o.key).toBeDefined();
      if (o.env) expect(row).toContain(`\`${o.env}\``);
      if (o.flag) expect(row).toContain(`\`${o.flag}\``);
    }
    for (const o of [...DISPATCH_OPTIONS.options, ...SCHEDULER_OPTIONS.options])
      expect(committed).toContain(`| \`${o.key}\` |`);
    expect(committed).toContain('| `faults.quota.max_instances` |');
    expect(committed).toContain('| `dispatcher.sync_interval` | duration | `5m` |');
  });
});
