/**
 * `${VAR}` substitution in config values. It runs on each string value after YAML parsing,
 * so an environment variable can never change the structure of the file.
 */

export type Env = Readonly<Record<string, string | undefined>>;

/** `unsetOnly`: every problem is an unset variable (the text itself is well formed). */
export type Substituted = { ok: true; text: string } | { ok: false; problems: string[]; unsetOnly: boolean };

const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;
const SYNTAX_HELP = 'write ${NAME}, ${NAME:-default}, or $${ for a literal "${"';

/**
 * Replaces `${VAR}` and `${VAR:-default}` in one string value from env.
 * As in the shell, the default is used when VAR is unset or empty; `$${` stands for a literal
 * `${`. Problems never quote the value, which may be a secret.
 */
export function substituteEnv(text: string, env: Env): Substituted {
  if (!text.includes('${')) return { ok: true, text };
  const problems: string[] = [];
  let unset = 0;
  let out = '';
  let i = 0;
  while (i < text.length) {
    if (text.startsWith('$${', i)) {
      out += '${';
      i += 3;
      continue;
    }
    if (!text.startsWith('${', i)) {
      out += text[i];
      i += 1;
      continue;
    }
    const close = text.indexOf('}', i + 2);
    if (close === -1) {
      problems.push(`has "\${" without a closing "}"; ${SYNTAX_HELP}`);
      break;
    }
    const match = REFERENCE.exec(text.slice(i + 2, close));
    const name = match?.[1];
    const fallback = match?.[2];
    if (match === null || name === undefined) {
      problems.push(`has "\${" that is not followed by a variable name (letters, digits, _); ${SYNTAX_HELP}`);
    } else if (fallback !== undefined && fallback.includes('${')) {
      problems.push(`has a reference to ${name} whose default contains "\${"; defaults cannot contain references`);
    } else {
      const value = env[name];
      if (value !== undefined && !(fallback !== undefined && value === '')) out += value;
      else if (fallback !== undefined) out += fallback;
      else {
        unset++;
        problems.push(`environment variable ${name} is not set; set it, or give a default with \${${name}:-default}`);
      }
    }
    i = close + 1;
  }
  return problems.length === 0 ? { ok: true, text: out } : { ok: false, problems, unsetOnly: unset === problems.length };
}
