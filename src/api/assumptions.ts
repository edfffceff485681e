/**
 * Constants that follow from the API assumptions written down in docs/api-assumptions.md.
 * Keep every "not shown in the spec" decision the code depends on here.
 */

/** A2: the HTTP status the simulator answers for each error code. */
export const ERROR_STATUS: Readonly<Record<string, number>> = {
  unauthorized: 401,
  scope_missing: 403,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  validation_failed: 422,
  payment_required: 402,
  limit_reached: 409,
  too_large: 413,
  rate_limited: 429,
  unavailable: 503,
};

/** A6: the page size hostwatch asks for on paged lists whose limit the spec does not give. */
export const DEFAULT_PAGE_SIZE = 200;

/**
 * A33: whether a page of a list says more pages follow; null when `has_more` is there but
 * neither true nor false. `has_more` decides when it is there (the spec's list shape); a
 * plain (unpaged) list has neither field, and one page is the whole list (A4, A5). A page
 * with a `next_cursor` but no `has_more` is followed: taken as the last page, it would drop
 * every record after it, and those would look removed.
 */
export function morePages(hasMore: unknown, next: unknown): boolean | null {
  if (typeof hasMore === 'boolean') return hasMore;
  if (hasMore !== undefined && hasMore !== null) return null;
  return typeof next === 'string' && next !== '';
}

/** Statuses that mean "try again later" rather than "this request is wrong". */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

/**
 * A24: site record states that mean the platform switched the site off (the default
 * `states` parameter of rule site-suspended; a test keeps the two equal).
 */
export const SUSPENDED_SITE_STATES: readonly string[] = ['suspended', 'expired', 'switched_off', 'off', 'disabled', 'paused'];

/** A26: a local business's recent change that edits its profile (the `fields` parameter of rule local-profile-changed). */
export const PROFILE_EDIT_FIELDS = '(?i)^(name|phone|address)';

/**
 * A3: the longest a Retry-After may hold requests. A longer pause is still honoured (no
 * request goes before it ends), but polls fail at once rather than wait: a worker never
 * sits on a pause of an hour.
 */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * A7: the API's own rate limit is not shown, so hostwatch adapts: a 429 halves the pace
 * (never below `minFraction` of `api.max_requests_per_second`), and every accepted request
 * adds `increase` of the configured pace back, so a few dozen good replies restore it.
 */
export const ADAPTIVE_PACING = { decrease: 0.5, increase: 0.01, minFraction: 0.05 } as const;
