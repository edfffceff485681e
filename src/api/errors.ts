/**
 * Typed errors of the API client. Code branches on `code`, never on message text
 * (the undici model). Messages never contain the API key: they are built only from the
 * endpoint path, the status and the server's error code/message.
 */

/**
 * Codes the client produces itself, besides the API's own (`scope_missing`, `not_found`, …).
 * `too_large` is also an API code (a file over 5 MB); the client uses it for a reply over
 * `api.max_reply_bytes`.
 */
export type ClientErrorCode = 'timeout' | 'network' | 'bad_response' | 'page_cap' | 'aborted' | 'too_large';

export class ApiError extends Error {
  override readonly name = 'ApiError';
  /** The API's error code (A1), or one of ClientErrorCode, or `http_<status>`. */
  readonly code: string;
  readonly statusCode: number | null;
  /** The endpoint path after /api/v1, without query string. */
  readonly endpoint: string;
  readonly details: Record<string, unknown>;
  /** Whether trying again later may succeed (429, 5xx, timeouts, network errors). */
  readonly retryable: boolean;
  /** Seconds the server asked us to wait (429 Retry-After), if it said. */
  readonly retryAfterMs: number | null;

  constructor(init: {
    code: string;
    message: string;
    endpoint: string;
    statusCode?: number | null;
    details?: Record<string, unknown>;
    retryable?: boolean;
    retryAfterMs?: number | null;
  }) {
    super(`${init.endpoint}: ${init.message}`);
    this.code = init.code;
    this.statusCode = init.statusCode ?? null;
    this.endpoint = init.endpoint;
    this.details = init.details ?? {};
    this.retryable = init.retryable ?? false;
    this.retryAfterMs = init.retryAfterMs ?? null;
  }

  /** The same error about another endpoint (a budget refusal is raised before any endpoint is known). */
  at(endpoint: string): ApiError {
    if (endpoint === this.endpoint) return this;
    const { code, statusCode, details, retryable, retryAfterMs } = this;
    return new ApiError({ code, statusCode, details, retryable, retryAfterMs, endpoint, message: this.message.slice(this.endpoint.length + 2) });
  }

  /** For `scope_missing`: the scope the key lacks, as named by the server. */
  get requiredScope(): string | null {
    const r = this.details['required'];
    return typeof r === 'string' ? r : null;
  }
}

/** True when `e` is an ApiError with the given code. */
export function isApiError(e: unknown, code?: string): e is ApiError {
  return e instanceof ApiError && (code === undefined || e.code === code);
}
