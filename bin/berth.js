#!/usr/bin/env node
// The berth executable: the compiled CLI (npm install runs the build through `prepare`).
import { statSync } from 'node:fs';
import { setTimeout } from 'node:timers';

// `berth agent` loads only the agent's command, from one file when `npm run build` bundled it: a SLURM job
// starts one agent per container (docs/SLURM.md). tsc rewrites every file it emits, so a bundle older than
// its output is stale (a bare `tsc` since): then the compiled modules.
function agentEntry() {
  const mtime = (rel) => statSync(new URL(rel, import.meta.url), { throwIfNoEntry: false })?.mtimeMs ?? -1;
  const bundle = '../dist/agent-main.bundle.js';
  return mtime(bundle) >= mtime('../dist/src/cli/agent-main.js') ? bundle : '../dist/src/cli/agent-main.js';
}
// A reader that went away (`berth usage --json | head -1`, a pager quit early) ends the command quietly with
// 141, the status of a program ended by SIGPIPE (Node.js ignores the signal and raises EPIPE instead, which
// unhandled is a stack trace). A command that watches for stop signals (up, server, dispatch) stops
// gracefully instead, so that what it started (the embedded PostgreSQL, local instances) stops with it:
// src/cli/stop-signals.ts. The agent's own logging is left as it is.
if (process.argv[2] !== 'agent')
  for (const stream of [process.stdout, process.stderr])
    stream.on('error', (err) => {
      if (err.code !== 'EPIPE') throw err;
      if (process.listenerCount('SIGTERM') === 0) process.exit(141);
    });

const { main } = await import(process.argv[2] === 'agent' ? agentEntry() : '../dist/src/cli/main.js');

// A command that has finished must not linger (a stopped `berth up` that never exits is a hung terminal):
// anything it left open is a bug, named here, and the process ends anyway. Writes to a terminal, a file or
// a pipe are synchronous on Linux, so no output is cut short.
const LINGER_MS = 5_000;

function finish(code) {
  process.exitCode = code;
  setTimeout(() => {
    const open = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'Timeout');
    console.error(
      `berth: still running ${LINGER_MS / 1000}s after finishing (left open: ${open.join(', ') || 'timers'}); exiting`,
    );
    process.exit(code);
  }, LINGER_MS).unref();
}

main(process.argv).then(finish, (err) => {
  console.error(`berth: ${err instanceof Error ? err.message : String(err)}`);
  finish(1);
});
