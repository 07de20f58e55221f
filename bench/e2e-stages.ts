// Where a slot's time goes between one container's exit and the next one's start (bench/e2e.ts, issue 12):
// the store's events (Locked, assign, Running, Complete, at the application's clock) joined with the agents'
// log lines (`starting`: the agent saw the assignment; `exited`: its runtime start and the exit it saw), all
// on this machine's clock. For each pair of containers that ran one after the other on the same node, the
// gap from the first one's exit on the agent to the second one's runtime start, stage by stage.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pool } from 'pg';

/** The stages of the gap, in order (each from the previous one's end). */
export const STAGES = [
  'exit on the agent → exit committed',
  'exit committed → next Locked (dispatcher pass)',
  'Locked → assign committed',
  'assign committed → agent sees it',
  'agent sees it → Running committed',
  'Running committed → runtime started',
] as const;

export interface StageFigure {
  stage: string;
  /** Milliseconds over the pairs. */
  mean: number;
  p50: number;
  p90: number;
}

export interface Stages {
  /** Pairs measured (consecutive containers on one node). */
  pairs: number;
  stages: StageFigure[];
  /** The whole gap, exit seen on the agent to the next runtime start. */
  gap: StageFigure;
  /** The containers' own runs: runtime started → exit seen on the agent. */
  run: StageFigure;
  /** From `t0` to the last node's first runtime start (s): the ramp-up until every slot runs. */
  rampUpSeconds: number | null;
}

interface Times {
  node: string | null;
  locked?: number;
  assigned?: number;
  running?: number;
  completed?: number;
  seen?: number;
  ran?: number;
  exitSeen?: number;
}

/**
 * Copies the agents' logs of the instances there now into `into` (by path): called while the run goes on,
 * since an instance destroyed at the end (nothing left to run) takes its log along.
 */
export async function collectAgentLogs(home: string, into: Map<string, string>): Promise<void> {
  const dir = join(home, 'instances');
  for (const id of await readdir(dir).catch(() => [])) {
    const file = join(dir, id, 'agent.log');
    const text = await readFile(file, 'utf8').catch(() => null);
    if (text !== null && text.length >= (into.get(file)?.length ?? 0)) into.set(file, text);
  }
}

function figure(stage: string, values: number[]): StageFigure {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return { stage, mean: Math.round(mean), p50: Math.round(at(0.5)), p90: Math.round(at(0.9)) };
}

/**
 * Reads the stages of a finished run whose Berth home is `home`, with the agents' logs collected during the
 * run (collectAgentLogs); `t0` is the first submission (epoch ms).
 */
export async function measureStages(
  pool: Pool,
  home: string,
  logs: Map<string, string>,
  t0: number,
): Promise<Stages> {
  await collectAgentLogs(home, logs);
  const times = new Map<string, Times>();
  const r = await pool.query<{
    id: string;
    node_id: string | null;
    locked: Date | null;
    assigned: Date | null;
    running: Date | null;
    completed: Date | null;
  }>(`
    SELECT c.id, c.node_id,
      max(e.at) FILTER (WHERE e.kind = 'state' AND e.message LIKE 'Locked%') AS locked,
      max(e.at) FILTER (WHERE e.kind = 'assign') AS assigned,
      max(e.at) FILTER (WHERE e.kind = 'state' AND e.message LIKE 'Running%') AS running,
      max(e.at) FILTER (WHERE e.kind = 'state' AND e.message LIKE 'Complete%') AS completed
    FROM containers c JOIN container_events e ON e.container_id = c.id
    GROUP BY c.id, c.node_id`);
  for (const row of r.rows)
    times.set(row.id, {
      node: row.node_id,
      locked: row.locked?.getTime(),
      assigned: row.assigned?.getTime(),
      running: row.running?.getTime(),
      completed: row.completed?.getTime(),
    });
  for (const text of logs.values()) {
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue;
      let l: { container?: string; msg?: string; time?: string; ran_at?: number; exit_seen_at?: number };
      try {
        l = JSON.parse(line) as typeof l;
      } catch {
        continue;
      }
      const t = l.container ? times.get(l.container) : undefined;
      if (!t || !l.time) continue;
      if (l.msg === 'starting') t.seen = Date.parse(l.time);
      else if (l.msg?.startsWith('exited')) {
        t.ran = l.ran_at;
        t.exitSeen = l.exit_seen_at;
      }
    }
  }
  const byNode = new Map<string, Times[]>();
  for (const t of times.values())
    if (t.node && t.locked !== undefined) (byNode.get(t.node) ?? byNode.set(t.node, []).get(t.node)!).push(t);
  const parts: number[][] = STAGES.map(() => []);
  const gaps: number[] = [];
  const runs: number[] = [];
  const firstRuns: number[] = [];
  for (const list of byNode.values()) {
    list.sort((a, b) => a.locked! - b.locked!);
    if (list[0]!.ran !== undefined) firstRuns.push(list[0]!.ran);
    for (const t of list) if (t.ran !== undefined && t.exitSeen !== undefined) runs.push(t.exitSeen - t.ran);
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1]!;
      const b = list[i]!;
      const marks = [a.exitSeen, a.completed, b.locked, b.assigned, b.seen, b.running, b.ran];
      if (marks.some((m) => m === undefined)) continue;
      const m = marks as number[];
      for (let k = 0; k < STAGES.length; k++) parts[k]!.push(m[k + 1]! - m[k]!);
      gaps.push(m[m.length - 1]! - m[0]!);
    }
  }
  return {
    pairs: gaps.length,
    stages: STAGES.map((s, k) => figure(s, parts[k]!)),
    gap: figure('whole gap: exit on the agent → next runtime start', gaps),
    run: figure("the container's run: runtime started → exit seen on the agent", runs),
    rampUpSeconds: firstRuns.length ? Number(((Math.max(...firstRuns) - t0) / 1000).toFixed(2)) : null,
  };
}

/** The stages as a Markdown table (PERFORMANCE.md's form). */
export function stagesTable(s: Stages): string {
  const rows = [...s.stages, s.gap, s.run].map((f) => `| ${f.stage} | ${f.mean} | ${f.p50} | ${f.p90} |`);
  return [
    `${s.pairs} pairs of consecutive containers on one node; ramp-up until every node ran one: ${s.rampUpSeconds} s`,
    '| stage | mean ms | p50 ms | p90 ms |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}
