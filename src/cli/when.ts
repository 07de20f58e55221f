// Times as people type them on the command line (`--run-after`), turned into the RFC 3339 the API takes:
// relative ("+20m", "+2h30m"), a local date and time ("2026-11-23 08:00", in this machine's timezone, as
// SLURM's --begin reads it), a time of day ("08:00": the next one), or RFC 3339 with a zone.
import { parseDuration, parseTime } from '../model/units.js';
import { UsageError } from './errors.js';

const EXPECTED =
  'expected +DURATION (e.g. +20m, +2h), a local time "YYYY-MM-DD HH:MM", a time of day "HH:MM", or an RFC 3339 time such as 2026-11-23T08:00:00Z';

/** The instant `text` means, seen at `now`; throws a UsageError naming `flag` and what is accepted. */
export function parseWhen(text: string, now: Date, flag = '--run-after'): Date {
  const fail = (why = EXPECTED): never => {
    throw new UsageError(`${flag}: ${why}, got ${JSON.stringify(text)}`);
  };
  const s = text.trim();
  if (s === 'now') return now;
  if (s.startsWith('+')) {
    let ms: number;
    try {
      ms = parseDuration(s.slice(1));
    } catch {
      return fail();
    }
    return new Date(now.getTime() + ms);
  }
  if (/[zZ]$|[+-]\d{2}:\d{2}$/.test(s)) {
    try {
      return parseTime(s.replace(' ', 'T'));
    } catch {
      return fail();
    }
  }
  const local = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(s);
  const clock = /^(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(s);
  let parts: number[];
  if (local) parts = local.slice(1).map((p) => Number(p ?? 0));
  else if (clock)
    parts = [
      now.getFullYear(),
      now.getMonth() + 1,
      now.getDate(),
      ...clock.slice(1).map((p) => Number(p ?? 0)),
    ];
  else return fail();
  const [y, mo, d, h, mi, sec] = parts as [number, number, number, number, number, number];
  let at = new Date(y, mo - 1, d, h, mi, sec);
  // The Date constructor rolls 2026-02-30 over to March: refuse what does not exist instead.
  if (
    at.getFullYear() !== y ||
    at.getMonth() !== mo - 1 ||
    at.getDate() !== d ||
    at.getHours() !== h ||
    at.getMinutes() !== mi
  )
    fail(
      `${EXPECTED} (that local time does not exist${mo <= 12 && d <= 31 ? ': a daylight-saving change?' : ''})`,
    );
  if (clock && at.getTime() <= now.getTime()) at = new Date(y, mo - 1, d + 1, h, mi, sec);
  return at;
}
