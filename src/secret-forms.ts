/**
 * The forms a secret may take in a text (invariant 7): shared by the log and error scrubber
 * (`log.ts`) and the API reply scrubber (`api/scrub.ts`).
 */

/** The shortest encoded piece of a secret that is looked for (shorter ones would match ordinary text). */
const MIN_ENCODED = 8;
/** The same for a piece that ends the encoded text (with its padding): a password at the end of AUTH PLAIN or Basic credentials. */
const MIN_ENCODED_END = 6;

/**
 * Each secret as written, and as a server or a library may repeat it encoded: percent-encoded
 * (a URL, a form), escaped as in a JSON string, and in base64 and base64url, as SMTP's `AUTH PLAIN`
 * (`base64("\0user\0pass")`), `AUTH LOGIN` and HTTP Basic credentials carry it. A secret
 * inside a longer base64 text is encoded one of three ways, by where it starts in a group of
 * three bytes, so each of the three is listed: the characters that come from the secret's
 * bytes alone, without the one or two at each end that share bits with its neighbours; and,
 * for a secret that ends the encoded text (a password in AUTH PLAIN or Basic credentials),
 * the piece up to the end with its padding.
 * Every scrubber (logs, stored errors, API replies) looks for all of them.
 */
export function secretForms(secrets: readonly string[]): string[] {
  const out = new Set<string>();
  for (const s of secrets) {
    if (s.length === 0) continue;
    out.add(s);
    const pct = encodeURIComponent(s);
    if (pct !== s) out.add(pct);
    // Inside a JSON string (a log line as pino writes it, an error a server quotes, or such
    // an error in a log line: escaped twice): a `"` or `\` of the secret is escaped there,
    // and the secret as written is not in the text.
    const json = JSON.stringify(s).slice(1, -1);
    if (json !== s) out.add(json).add(JSON.stringify(json).slice(1, -1));
    const bytes = Buffer.from(s, 'utf8');
    for (let lead = 0; lead < 3; lead++) {
      const b64 = Buffer.concat([Buffer.alloc(lead), bytes]).toString('base64');
      // Character i holds bits 6i..6i+5: it is the secret's alone from the first one past the
      // lead bytes' 8·lead bits to the last one inside its 8·(lead + length) bits.
      const from = Math.ceil((8 * lead) / 6);
      const piece = b64.slice(from, Math.floor((8 * (lead + bytes.length)) / 6));
      // Where the secret ends the encoded text, the rest is its own too: the last character
      // (its bits padded with zeros) and the `=` padding. So a short secret is still found there.
      const end = b64.slice(from);
      for (const [p, min] of [[piece, MIN_ENCODED], [end, MIN_ENCODED_END], [end.replace(/=+$/, ''), MIN_ENCODED]] as const) {
        if (p.length < min) continue;
        out.add(p);
        out.add(p.replace(/\+/g, '-').replace(/\//g, '_'));
      }
    }
  }
  return [...out];
}

/**
 * One regular expression source matching every form of every secret (secretForms), the
 * longest first so a form is replaced whole rather than by a shorter one inside it; null
 * without secrets. The `%XX` escapes of the percent-encoded form match their hex digits in
 * either case (RFC 3986: `%2b` is `%2B`), while the secret's own characters stay exact.
 */
export function secretPattern(secrets: readonly string[]): string | null {
  const percent = new Set(secrets.map((s) => encodeURIComponent(s)).filter((p, i) => p !== secrets[i]));
  const forms = secretForms(secrets).sort((a, b) => b.length - a.length);
  if (forms.length === 0) return null;
  return forms.map((f) => (percent.has(f) ? anyCaseEscapes(escapeRegExp(f)) : escapeRegExp(f))).join('|');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** `%2F` → `%2[fF]`: the hex letters of each escape, in either case. */
function anyCaseEscapes(pattern: string): string {
  return pattern.replace(/%([0-9A-F])([0-9A-F])/g, (_m, a: string, b: string) => `%${anyCase(a)}${anyCase(b)}`);
}

function anyCase(hex: string): string {
  return /[A-F]/.test(hex) ? `[${hex}${hex.toLowerCase()}]` : hex;
}
