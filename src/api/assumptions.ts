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
