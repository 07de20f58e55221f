// Measurements that are not tests (numbers for docs/performance/, never assertions on speed):
//   BERTH_MEASURE=1 npx vitest run --config vitest.measure.config.ts
// (mergeConfig would concatenate the include lists and run the whole suite as well: set it outright.)
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({ ...base, test: { ...base.test, include: ['test/**/measure.ts'] } });
