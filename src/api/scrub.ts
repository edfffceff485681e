/**
 * Secrets out of API replies, before anything is stored (invariant 7). A panel that echoes
 * the key back (in a "who called" field, an error detail, a URL) must not put it into a
 * snapshot, the change log, an event or a delivery.
 */

import { secretPattern } from '../secret-forms.js';

const REDACTED = '[REDACTED]';

/**
 * A function that takes a reply's raw text and its parsed value and returns the value with
 * every configured secret replaced, in strings and in keys. Most replies hold no secret:
 * without escape sequences their text alone proves it (a decoded string is then a substring
 * of the text), which costs one scan of the text per secret. With escapes (`\/`, `\u00e9`)
 * the decoded strings are looked at, still without copying anything unless a secret is there.
 */
export function replyScrubber(secrets: readonly string[]): (text: string, value: unknown) => unknown {
  const pattern = secretPattern(secrets.filter((s) => s.length >= 4));
  if (pattern === null) return (_text, value) => value;
  const re = new RegExp(pattern, 'g');
  // One scan for all of a secret's forms (about twice as fast as one includes() per form).
  const any = new RegExp(pattern);
  const hasSecret = (s: string): boolean => any.test(s);
  const holds = (v: unknown): boolean => {
    if (typeof v === 'string') return hasSecret(v);
    if (Array.isArray(v)) return v.some(holds);
    if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) if (hasSecret(k) || holds(x)) return true;
    }
    return false;
  };
  const scrub = (s: string): string => (hasSecret(s) ? s.replace(re, REDACTED) : s);
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrub(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      // defineProperty: a "__proto__" key from JSON.parse stays data, as it was.
      for (const [k, x] of Object.entries(v)) Object.defineProperty(out, scrub(k), { value: walk(x), enumerable: true, writable: true, configurable: true });
      return out;
    }
    return v;
  };
  return (text, value) => {
    const suspect = text.includes('\\') ? holds(value) : hasSecret(text);
    return suspect ? walk(value) : value;
  };
}
