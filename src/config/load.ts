/**
 * The IO half of config: read the file, hand the text to parseConfig, throw ConfigErrors.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { relative } from 'node:path';
import type { Env } from './env.js';
import { ConfigErrors } from './errors.js';
import { parseConfig, type ParseOptions } from './parse.js';
import type { Config } from './types.js';

/** Reads and parses a config file; throws ConfigErrors (code `config_invalid`) listing every problem. */
export async function loadConfig(file: string, env: Env = process.env, opts: ParseOptions): Promise<Config> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigErrors([{ file, line: null, column: null, path: '', message: readFailure(error) }]);
  }
  const result = parseConfig(text, file, env, opts);
  if (!result.ok) throw new ConfigErrors(result.errors);
  return result.config;
}

function readFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case 'ENOENT':
      return 'cannot read the config file: it does not exist (pass an existing YAML file with -c)';
    case 'EISDIR':
      return 'cannot read the config file: it is a folder (pass a YAML file with -c)';
    case 'EACCES':
    case 'EPERM':
      return 'cannot read the config file: permission denied';
    default:
      return `cannot read the config file: ${code ?? (error instanceof Error ? error.message : String(error))}`;
  }
}

/**
 * Why a rule file or folder that the config's `rules` lists cannot be read, or null (for
 * ParseOptions.rulePath): named as seen from the current folder, as the rule loader names it.
 */
export function rulePathProblem(path: string): string | null {
  return existsSync(path) ? null : `${relative(process.cwd(), path) || path}: no such file or folder`;
}
