// How a container's end reads for people, worded once for the event log, `berth show`, `why` and
// `submit --wait` (issue 10 item 14).
//
// An OOM kill inside a container whose main process still exits 0 (a child was killed for memory, the
// parent carried on) counts as a success: the exit code is the program's own verdict, as on docker and
// Kubernetes, which report OOMKilled only for the main process. It is never silent, though: the wording
// below says a process was killed and that the work may be incomplete, and the store adds a `warning`
// event.

/** "exit code 3", "exit code 137 (killed for memory: ...)", or the exit-0-with-OOM warning. */
export function describeExit(exitCode: number | null, oomKilled: boolean | null): string {
  const code = exitCode === null ? 'no exit code' : `exit code ${exitCode}`;
  if (!oomKilled) return code;
  if (exitCode === 0) return `${code}, but ${OOM_CHILD}`;
  return `${code} (OOM-killed: the container reached its memory limit)`;
}

const OOM_CHILD =
  'a process in it was killed for memory (OOM: the container reached its memory limit); its work may be incomplete';

/** The warning for a container that exited 0 although one of its processes was OOM-killed, else null. */
export function oomWarning(exitCode: number | null, oomKilled: boolean | null): string | null {
  return oomKilled && exitCode === 0 ? `warning: ${OOM_CHILD}` : null;
}
