/**
 * "Did you mean …?": the near miss of a misspelt word among the words allowed, shared by
 * the config, rule files, the CLI and the HTTP API.
 */

/** The allowed word nearest to a misspelt one, if it is near enough to be the likely intent. */
export function closest(word: string, allowed: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of allowed) {
    const distance = editDistance(word.toLowerCase(), candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best !== null && bestDistance <= Math.max(1, Math.floor(best.length / 3)) ? best : null;
}

/** `unknown key (did you mean every?); allowed: a, b, c`: a key not among those allowed, with its near miss. */
export function unknownKeyMessage(key: string, allowed: readonly string[], what = 'key'): string {
  const near = closest(key, allowed);
  return `unknown ${what}${near ? ` (did you mean ${near}?)` : ''}; allowed: ${allowed.join(', ') || '(none)'}`;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitute = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitute));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
