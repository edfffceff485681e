import { isIP } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { HttpError } from './http.js';

/**
 * What a web page the operator happens to visit must not be able to do to the daemon
 * (docs/operations.md, "The HTTP server and browsers"). Pure: headers in, a refusal out.
 *
 * - DNS rebinding: a page on evil.example whose name is re-pointed at 127.0.0.1 is "same
 *   origin" to the browser, so only the `Host` header tells it apart. The server answers
 *   only to names it is known by: localhost, IP literals (a literal cannot be rebound) and
 *   `server.allowed_hosts`.
 * - Cross-site writes: a form or `fetch` from another origin may POST without a preflight
 *   when its type is text/plain. Writes need `Content-Type: application/json` (which a
 *   browser sends cross-origin only after a preflight this server never grants), and a
 *   write whose `Origin` or `Sec-Fetch-Site` names another site is refused.
 */

/** The names the server answers to besides localhost and IP literals, as written in `server.allowed_hosts`. */
export type AllowedHosts = readonly string[];

/** Refuse a request whose Host header names another server (DNS rebinding); null when it may go on. */
export function hostProblem(headers: IncomingHttpHeaders, allowed: AllowedHosts): HttpError | null {
  const host = headers.host;
  // HTTP/1.0 clients may send none; a browser always does.
  if (host === undefined || host === '') return null;
  const name = hostnameOf(host);
  if (name !== null && hostAllowed(name, allowed)) return null;
  return new HttpError(
    403,
    'host_not_allowed',
    `this server does not answer to the name ${JSON.stringify(host.slice(0, 100))} (a guard against DNS rebinding); if hostwatch is reached by that name, add it to server.allowed_hosts`,
  );
}

/** Whether a host name (lower case, no port) is one this server answers to. */
export function hostAllowed(name: string, allowed: AllowedHosts): boolean {
  if (name === 'localhost' || name.endsWith('.localhost') || isIP(name) !== 0) return true;
  return allowed.some((a) => a === '*' || a === name || (a.startsWith('.') && (name.endsWith(a) || name === a.slice(1))));
}

/**
 * Refuse a write (any method but GET) that a browser sent from another origin, or whose
 * body is not declared JSON; null when it may go on. Requests without `Origin` (curl,
 * scripts, the CLI) pass the origin check: browsers send it on every cross-origin write.
 */
export function writeProblem(method: string, headers: IncomingHttpHeaders): HttpError | null {
  if (method === 'GET') return null;
  const site = headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return crossOrigin(`Sec-Fetch-Site: ${site}`);
  const origin = headers.origin;
  if (origin !== undefined && !sameOrigin(origin, headers.host)) return crossOrigin(`Origin: ${origin.slice(0, 100)}`);
  const type = (headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    return new HttpError(
      415,
      'unsupported_media_type',
      `${method} needs Content-Type: application/json (got ${type === '' ? 'none' : JSON.stringify(type.slice(0, 100))})`,
    );
  }
  return null;
}

function crossOrigin(seen: string): HttpError {
  return new HttpError(403, 'cross_origin', `a write from another site is refused (${seen}); use the dashboard served by this daemon, or a client that sends no Origin (curl, scripts)`);
}

/** Whether an `Origin` names the scheme-less `host[:port]` the request was sent to. */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    // "null" (a sandboxed frame, a file: page) and anything unreadable are another site.
    return false;
  }
  if (o.protocol !== 'http:' && o.protocol !== 'https:') return false;
  const h = splitHost(host);
  if (h === null) return false;
  const port = (p: string): string => p || (o.protocol === 'https:' ? '443' : '80');
  return o.hostname.toLowerCase().replace(/^\[|\]$/g, '') === h.name && port(o.port) === port(h.port);
}

/** The host name of a Host header value, lower case, without port or brackets; null when it is unreadable. */
function hostnameOf(host: string): string | null {
  return splitHost(host)?.name ?? null;
}

function splitHost(host: string): { name: string; port: string } | null {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+))(?::(\d{1,5}))?$/.exec(host.trim());
  if (!m) return null;
  const name = (m[1] ?? m[2]!).toLowerCase().replace(/\.$/, '');
  return { name, port: m[3] ?? '' };
}
