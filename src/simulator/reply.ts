/** The reply value every simulator handler returns, and the error body of docs/api-assumptions.md A1/A2. */
import { ERROR_STATUS } from '../api/assumptions.js';

/** A finished HTTP answer; handlers return these so the HTTP layer (and faults) can shape them afterwards. */
export interface Reply {
  status: number;
  /** JSON text, or bytes for a binary download (then `headers` names the content type). */
  body: string | Buffer;
  headers?: Record<string, string>;
}

/** 200 (or `status`) with `{"data": ...}`. */
export function dataReply(data: unknown, status = 200): Reply {
  return { status, body: JSON.stringify({ data }) };
}

/** An error in the A1 layout; the status comes from ERROR_STATUS (A2) unless given. */
export function errorReply(code: string, message: string, details?: Record<string, unknown>, status?: number): Reply {
  const error: Record<string, unknown> = { code, message };
  if (details) error.details = details;
  return { status: status ?? ERROR_STATUS[code] ?? 500, body: JSON.stringify({ error }) };
}

/** The error code an injected status fault answers with: A2's code for that status, else a generic one. */
export function codeForStatus(status: number): string {
  for (const [code, s] of Object.entries(ERROR_STATUS)) {
    // scope_missing promises details.required, which an injected fault cannot honestly give.
    if (s === status && code !== 'scope_missing') return code;
  }
  return status >= 500 ? 'internal_error' : `http_${status}`;
}
