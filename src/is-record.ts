/** A plain JSON object (not null, not an array): what API replies and config maps are. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
