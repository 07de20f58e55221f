#!/usr/bin/env node
// The berth executable: the compiled CLI (npm install runs the build through `prepare`).
import { main } from '../dist/src/cli/main.js';

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(`berth: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
