// Reading and writing report files (report.json, report.html) for `berth sim` and `berth sim compare`.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { reportJson, type Report } from './build.js';
import { renderReportHtml } from './html.js';

/** Writes report.json and report.html into `dir` (created if needed); returns their paths. */
export function writeReport(dir: string, report: Report): { json: string; html: string } {
  mkdirSync(dir, { recursive: true });
  const json = join(dir, 'report.json');
  const html = join(dir, 'report.html');
  writeFileSync(json, reportJson(report));
  writeFileSync(html, renderReportHtml(report));
  return { json, html };
}

/** Reads a report.json written by writeReport; the error names the file and what is wrong. */
export function readReport(path: string): Report {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`${path}: cannot read a report: ${(err as Error).message}`);
  }
  const format = (value as { format?: unknown } | null)?.format;
  if (format !== 'berth-sim-report/1')
    throw new Error(`${path}: format: expected "berth-sim-report/1", got ${JSON.stringify(format)}`);
  return value as Report;
}
