// A real process logger (src/log/logger.ts) whose JSON lines are kept in memory for a test to read.
import { createLogger, formatLine, type Logger } from '../../src/log/logger.js';

export interface CapturedLog {
  logger: Logger;
  /** The raw JSON lines. */
  lines: string[];
  /** The lines parsed. */
  entries(): Record<string, unknown>[];
}

/** `echo`: also write each line, readable, to stderr (when debugging a test). */
export function captureLog(level = 'debug', name = 'berth test', echo = false): CapturedLog {
  const lines: string[] = [];
  const logger = createLogger({
    name,
    level,
    pretty: false,
    destination: {
      write: (line: string) => {
        lines.push(line);
        if (echo) process.stderr.write(formatLine(line));
      },
    },
  });
  return { logger, lines, entries: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}
