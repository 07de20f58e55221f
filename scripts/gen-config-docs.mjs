// Writes docs/CONFIG.md from the option declarations (run after `npm run build`: npm run docs:config).
// test/config/docs.test.ts fails when the committed file differs from what this writes.
import { writeFileSync } from 'node:fs';
import { configMarkdown } from '../dist/src/config/docs.js';

writeFileSync('docs/CONFIG.md', configMarkdown());
console.log('wrote docs/CONFIG.md');
