// Measurements that are not tests (numbers for docs/performance/, never assertions on speed):
//   BERTH_MEASURE=1 npx vitest run --config vitest.measure.config.ts
import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

export default mergeConfig(base, defineConfig({ test: { include: ['test/**/measure.ts'] } }));
