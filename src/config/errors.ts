/**
 * Config errors: each names the file, line and column, the key path, the value and what is
 * allowed. They are collected, never thrown one by one, so a user fixes everything in one go.
 */

/** One problem in a config file. `line`/`column` are 1-based; null when there is no place to point at. */
export interface ConfigError {
  file: string;
  line: number | null;
  column: number | null;
  /** Key path like `channels[1].url`; empty for problems with the file as a whole. */
  path: string;
  /** The offending value; `"[redacted]"` for secrets, absent for a missing key. */
  value?: unknown;
  /** What is wrong and what is allowed, e.g. `must be a duration like 30s, 5m, 6h (got "soon")`. */
  message: string;
}

/** Shown instead of the value of a secret (API key, tokens, passwords, webhook secrets, Slack URLs). */
export const REDACTED = '[redacted]';

/** Formats one error as `file:line:column: path: message` (parts without a value are left out). */
export function formatConfigError(error: ConfigError): string {
  const where = error.line === null ? error.file : `${error.file}:${error.line}:${error.column ?? 1}`;
  return error.path === '' ? `${where}: ${error.message}` : `${where}: ${error.path}: ${error.message}`;
}

/** Thrown by loadConfig when the file cannot be read or is invalid; carries every error found. */
export class ConfigErrors extends Error {
  /** Stable code to branch on (never branch on the message). */
  readonly code = 'config_invalid';
  readonly errors: readonly ConfigError[];

  constructor(errors: readonly ConfigError[]) {
    super(formatConfigErrors(errors));
    this.name = 'ConfigErrors';
    this.errors = errors;
  }

  /** Every error, one per line, in file order. */
  format(): string {
    return formatConfigErrors(this.errors);
  }
}

/** Formats a list of errors, one per line. */
export function formatConfigErrors(errors: readonly ConfigError[]): string {
  return errors.map(formatConfigError).join('\n');
}

/** Turns a key path into its written form: ['channels', 1, 'url'] -> `channels[1].url`. */
export function formatPath(path: readonly (string | number)[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[A-Za-z0-9_-]+$/.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}
