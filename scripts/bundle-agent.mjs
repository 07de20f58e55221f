// `berth agent` as one file (dist/agent-main.bundle.js), built after tsc by `npm run build`: a SLURM job
// starts a one-shot agent per container, and loading ~70 modules one by one (resolve, open, read, link
// each; pino and commander are a few dozen CommonJS files more) took about half of the agent's time in the
// job. One file of the same compiled code loads in a fraction of that (docs/performance/vs-slurm.md).
// bin/berth.js uses it only when it is newer than tsc's output (tsc rewrites every file it emits), so a
// bare `tsc` never runs an old bundle: it falls back to dist/src/cli/agent-main.js.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
await build({
  absWorkingDir: root,
  entryPoints: ['dist/src/cli/agent-main.js'],
  outfile: 'dist/agent-main.bundle.js',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // Less to parse; names kept, so stack traces still read.
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'none',
  logLevel: 'warning',
  // The CommonJS packages (pino, commander) call require(); an ES module has none of its own.
  banner: {
    js: "import { createRequire as __berthRequire } from 'node:module'; const require = __berthRequire(import.meta.url);",
  },
});
