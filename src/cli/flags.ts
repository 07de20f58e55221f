// The flags of the process options, made from their declarations (src/config/options.ts): a declared
// option gets its flag on the commands of the processes that read it, and configFor() layers what was
// given over the config file and the environment.
import { Option as Flag, type Command } from 'commander';
import type { Option, Process } from '../config/declare.js';
import { loadConfig, PROCESS_OPTIONS, type Config, type OptionKey } from '../config/options.js';

function flagOf(o: Option): Flag {
  const d = o.defaultText ?? (o.default === null ? 'none' : String(o.default));
  const help = `${o.help.replace(/\.$/, '')} (${o.env ? `$${o.env}; ` : ''}${d === 'required' ? d : `default ${d}`})`;
  return new Flag(`${o.flag} ${o.kind.placeholder}`, help);
}

/** Adds the program-wide flags (home, API URL, token) to the program. */
export function withGlobalFlags(program: Command): Command {
  for (const o of PROCESS_OPTIONS.options) if (o.flag && o.global) program.addOption(flagOf(o));
  return program;
}

/** Adds the flags of the options `process` reads (the program-wide ones are already there). */
export function withOptionFlags(cmd: Command, process: Process): Command {
  for (const o of PROCESS_OPTIONS.options)
    if (o.flag && !o.global && o.usedBy?.includes(process)) cmd.addOption(flagOf(o));
  return cmd;
}

/** The process options for a command: its flags and the program's, over the environment and the file. */
export function configFor(cmd: Command): Config {
  const given = cmd.optsWithGlobals() as Record<string, unknown>;
  // Only the flags these commands declared: another command's --config is not the dispatch config.
  const declared = new Set<string>();
  for (let c: Command | null = cmd; c; c = c.parent)
    for (const f of c.options) if (f.long) declared.add(f.long);
  const flags: Partial<Record<OptionKey, unknown>> = {};
  for (const o of PROCESS_OPTIONS.options) {
    if (!o.flag || !declared.has(o.flag)) continue;
    const v = given[new Flag(`${o.flag} <v>`).attributeName()];
    if (v !== undefined) flags[o.key] = v;
  }
  return loadConfig(flags);
}
