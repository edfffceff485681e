import type { IncomingMessage, ServerResponse } from 'node:http';

/** A request as route handlers see it: the parsed URL and the path's captured groups. */
export interface Request {
  raw: IncomingMessage;
  method: string;
  url: URL;
  /** Groups captured by the route's path pattern. */
  params: string[];
}

/** One route: a method, an exact path or a pattern, and a handler. */
export interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  path: string | RegExp;
  /** Health checks answer without a token (Docker's HEALTHCHECK, load balancers). */
  public?: boolean;
  /**
   * Answers whatever name it is reached by (the health checks: a load balancer or a
   * Kubernetes probe may use a name nobody put in `server.allowed_hosts`).
   */
  anyHost?: boolean;
  /**
   * Takes the token as `?access_token=` too (a GET only: the SSE stream, since EventSource
   * cannot send headers). Everywhere else a token in a URL, which lands in proxy logs and
   * browser history, is not accepted.
   */
  queryToken?: boolean;
  handler: (req: Request, res: ServerResponse) => void | Promise<void>;
}

/** Send a JSON reply. */
export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

/** Send an error reply in the one error shape the server uses: `{error: {code, message}}`. */
export function fail(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  json(res, status, { error: { code, message } }, headers);
}

/** Raised by handlers for a bad request; the server turns it into a 4xx JSON error. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Read a JSON request body (at most `limit` bytes); throws HttpError on bad input. */
export async function readJson(req: IncomingMessage, limit = 64 * 1024): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new HttpError(413, 'too_large', `body larger than ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(400, 'bad_json', 'the body is not valid JSON');
  }
}

/**
 * A whole-number query parameter within bounds; null when absent or empty. Anything else
 * is a 400 naming the parameter, what is allowed and what was given.
 */
export function intParam(q: URLSearchParams, name: string, o: { min: number; max: number; expected: string }): number | null {
  const text = q.get(name);
  if (text === null || text === '') return null;
  return wholeNumber(name, text, o);
}

/**
 * Refuse a query parameter an endpoint does not take, one given twice, or one given empty:
 * ignored, a misspelt or unsupported filter would bring back the unfiltered answer as if it
 * worked.
 * `hints` add a word to the refusal of a parameter that is taken elsewhere.
 */
export function onlyParams(q: URLSearchParams, endpoint: string, names: readonly string[], hints: Record<string, string> = {}): void {
  const counts = new Map<string, number>();
  for (const name of q.keys()) counts.set(name, (counts.get(name) ?? 0) + 1);
  for (const [name, n] of counts) {
    if (!names.includes(name)) {
      const hint = Object.hasOwn(hints, name) ? ` (${hints[name]})` : '';
      throw badRequest(`${name.slice(0, 80)}: unknown parameter; ${endpoint} takes ${names.length ? names.join(', ') : 'none'}${hint}`);
    }
    if (n > 1) throw badRequest(`${name}: given ${n} times; give it once`);
    // `type=` read as absent would bring back the unfiltered answer, like an unknown one.
    if (q.get(name) === '') throw badRequest(`${name}: empty; give it a value, or leave it out`);
  }
}

/** A whole number within bounds, or a 400 naming the parameter. */
export function wholeNumber(name: string, text: string, o: { min: number; max: number; expected: string }): number {
  const n = /^\d{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < o.min || n > o.max) throw badRequest(`${name}: expected ${o.expected} (got ${shown(text)})`);
  return n;
}

/** A given value, quoted and cut short, for an error message. */
export function shown(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}

/** A 400 in the server's error shape: `{error: {code: 'bad_request', message}}`. */
export function badRequest(message: string): HttpError {
  return new HttpError(400, 'bad_request', message);
}
