// moto_server (Python moto 5.2): a real EC2 API on this machine, started on a free port and stopped again.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

export interface MotoServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Why moto_server cannot be started here, or null when it can. */
export function motoUnavailable(bin = process.env.BERTH_MOTO_SERVER ?? 'moto_server'): string | null {
  const r = spawnSync(bin, ['--help'], { encoding: 'utf8', timeout: 30_000 });
  if (r.error) return `${bin} is not usable (${r.error.message}); it comes with Python's moto[server] 5.x`;
  if (r.status !== 0) return `${bin} --help exited ${r.status}: ${(r.stderr || '').trim().split('\n').pop()}`;
  return null;
}

/** Starts moto_server on 127.0.0.1 and a free port; resolves once it answers. */
export async function startMoto(
  opts: { bin?: string; timeoutMs?: number; log?: (line: string) => void } = {},
): Promise<MotoServer> {
  const bin = opts.bin ?? process.env.BERTH_MOTO_SERVER ?? 'moto_server';
  // setpriv's parent-death signal: a test or `berth up` killed before its clean-up leaves no moto behind.
  const argv = [bin, '-H', '127.0.0.1', '-p', '0'];
  const child: ChildProcess = spawn(
    hasSetpriv() ? 'setpriv' : bin,
    hasSetpriv() ? ['--pdeathsig', 'KILL', '--', ...argv] : argv.slice(1),
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: stop() ends the server and any worker it forked.
      detached: true,
    },
  );
  let output = '';
  const exited = new Promise<number>((r) => child.once('exit', (code, sig) => r(code ?? (sig ? 128 : -1))));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(`moto_server did not start within ${opts.timeoutMs ?? 30_000} ms: ${output.slice(-500)}`),
        ),
      opts.timeoutMs ?? 30_000,
    );
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = /Running on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${bin}: ${err.message}`));
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`moto_server exited ${code} before it answered: ${output.slice(-500)}`));
    });
  }).catch(async (err: Error) => {
    kill(child, 'SIGKILL');
    throw err;
  });
  // Its request log is noise (one line per call): keep reading so the pipe never fills, log nothing.
  child.stdout!.removeAllListeners('data').resume();
  child.stderr!.removeAllListeners('data').resume();
  opts.log?.(`moto_server ${url} (pid ${child.pid})`);
  return {
    url,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      kill(child, 'SIGTERM');
      const t = setTimeout(() => kill(child, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    },
  };
}

function kill(child: ChildProcess, sig: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, sig);
  } catch {
    /* gone */
  }
}

let setpriv: boolean | null = null;
function hasSetpriv(): boolean {
  setpriv ??= spawnSync('setpriv', ['--version']).status === 0;
  return setpriv;
}
