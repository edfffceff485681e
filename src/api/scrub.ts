/**
 * Secrets out of API replies, before anything is stored (invariant 7). A panel that echoes
 * the key back (in a "who called" field, an error detail, a URL) must not put it into a
 * snapshot, the change log, an event or a delivery.
 */

const REDACTED = '[REDACTED]';

/**
 * A function that takes a reply's raw text and its parsed value and returns the value with
 * every configured secret replaced, in strings and in keys. Most replies hold no secret and
 * no escape sequence, and then their text alone proves it (a decoded string is then a
 * substring of the text): that case costs one scan of the text and returns the value as it is.
 */
export function replyScrubber(secrets: readonly string[]): (text: string, value: unknown) => unknown {
  const list = [...new Set(secrets)].filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
  if (list.length === 0) return (_text, value) => value;
  const re = new RegExp(list.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  const hasSecret = (s: string): boolean => list.some((secret) => s.includes(secret));
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
  return (text, value) => (!text.includes('\\') && !hasSecret(text) ? value : walk(value));
}
