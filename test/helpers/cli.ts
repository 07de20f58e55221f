// Running the real `berth` executable (the compiled CLI: `npm test` builds it first).
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { vi } from 'vitest';
import { main } from '../../src/cli/main.js';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'berth.js');

export function assertBuilt(): void {
  if (!existsSync(join(ROOT, 'dist', 'src', 'cli', 'main.js')))
    throw new Error('dist/ is missing: run `npm run build` (npm test does)');
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `berth ARGS` to completion. */
export function berth(args: string[], env: NodeJS.ProcessEnv): CliResult {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** Starts a long-running `berth ARGS` (server, up); stop() sends SIGINT and waits for the exit. */
export function berthDaemon(args: string[], env: NodeJS.ProcessEnv) {
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number>((r) => child.on('exit', (code, sig) => r(code ?? (sig ? 128 : -1))));
  return {
    child,
    output: () => output,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGINT'): Promise<number> {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * Starts `berth server` on a free port for the BERTH_HOME in env and waits until it listens (it writes
 * HOME/api-url); fails with its output if it exits first. Returns the daemon and its API URL.
 */
export async function startServer(home: string, env: NodeJS.ProcessEnv) {
  rmSync(join(home, 'api-url'), { force: true });
  const server = berthDaemon(['server', '--listen', '127.0.0.1:0'], env);
  const url = await until(
    () =>
      readIfExists(join(home, 'api-url')) ||
      (server.child.exitCode !== null && Promise.reject(new Error(server.output()))),
    60_000,
    'the server to listen',
  );
  return { server, url: url.trim().replace(/\/$/, '') };
}

/** Waits for a condition, polling, with a deadline. */
export async function until<T>(
  fn: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function readIfExists(path: string): string | null {
  return existsSync(path) ? readFileSync(path, 'utf8') : null;
}

/** Processes whose command line mentions `path` (agents, boot wrappers, containers, PostgreSQL of a test home). */
export function processesMentioning(path: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', path], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.includes('pgrep'));
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** Kills (SIGKILL) every process whose command line mentions `path`: cleanup after a failed test. */
export function killProcessesMentioning(path: string): void {
  for (const line of processesMentioning(path)) {
    try {
      process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

/**
 * A fresh BERTH_HOME for a test (0711: as root the embedded PostgreSQL runs as `postgres` and must reach
 * its data inside) and the environment that points the real executable at it and nowhere else.
 */
export function testHome(prefix: string): { home: string; env: NodeJS.ProcessEnv } {
  const home = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(home, 0o711);
  return {
    home,
    env: {
      BERTH_HOME: home,
      BERTH_DATABASE_URL: '',
      BERTH_API_URL: '',
      BERTH_TOKEN: '',
      BERTH_LOG_LEVEL: 'silent',
    },
  };
}

/** Runs `berth ARGS` in-process (no build needed) and captures what it writes and its exit code. */
export async function berthInProcess(...args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  const log = vi.spyOn(console, 'error').mockImplementation((...parts: unknown[]) => {
    stderr += parts.join(' ') + '\n';
  });
  try {
    const code = await main(['node', 'berth', ...args]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    log.mockRestore();
  }
}
