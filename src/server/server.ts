import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isLoopback } from '../config/schema.js';
import { storageFailure } from '../store/failures.js';
import { hostProblem, writeProblem, type AllowedHosts } from './guard.js';
import { fail, HttpError, type Route } from './http.js';

/** How long a client may take to send a whole request by default (headers and body). */
export const REQUEST_TIMEOUT_MS = 10_000;

/** What a 503 `storage_unavailable` says, by the kind of store failure (src/store/failures.ts). */
const STORAGE_FAILURES: Record<NonNullable<ReturnType<typeof storageFailure>>, string> = {
  unavailable: 'the database cannot be reached; hostwatch goes on and answers once it is back (GET /readyz says why)',
  full: 'the database is out of space (GET /readyz says more)',
  locked: 'the database is locked by another process (GET /readyz says more)',
  damaged: 'the database is damaged (GET /readyz says more)',
};

/** Raised when the server must not start (for example a public bind without a token). */
export class ServerConfigError extends Error {
  override readonly name = 'ServerConfigError';
  readonly code = 'server_config';
}

/** Split `host:port` (IPv6 in brackets) into its parts. */
export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(listen);
  if (!m) throw new ServerConfigError(`server.listen: expected host:port (got "${listen}")`);
  return { host: (m[1] ?? m[2])!, port: Number(m[3]) };
}

export { isLoopback };

/**
 * The operator HTTP server. Routes come from modules under routes/; this file only
 * dispatches, authenticates and turns errors into JSON. Binding beyond loopback needs a
 * token (`server.token`), so a daemon is never exposed by accident.
 */
export async function startServer(opts: {
  listen: string;
  token: string | null;
  routes: readonly Route[];
  /** Names the server answers to besides localhost and IP literals (`server.allowed_hosts`). */
  allowedHosts?: AllowedHosts;
  /** How long a client may take to send a whole request, headers and body (default 10 s). */
  requestTimeoutMs?: number;
  onError?: (e: unknown) => void;
}): Promise<{ server: Server; url: string; close: () => Promise<void> }> {
  const { host, port } = parseListen(opts.listen);
  if (!isLoopback(host) && !opts.token) {
    throw new ServerConfigError(
      `server.listen: ${opts.listen} is reachable from other machines; set server.token (a bearer token) or listen on 127.0.0.1`,
    );
  }
  const allowed = opts.allowedHosts ?? [];
  const requestTimeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // A body that never arrives must not hold a connection (and a handler) for minutes:
  // Node answers 408 and closes once the whole request has not come in time. It is
  // checked every `connectionsCheckingInterval`, so that is kept well below the timeout.
  // An SSE stream is not affected: its request (a GET) is complete at once.
  const timeouts = {
    requestTimeout,
    headersTimeout: requestTimeout,
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(requestTimeout / 4))),
  };
  const server = createServer(timeouts, (req, res) => {
    dispatch(req, res, opts.routes, opts.token, allowed).catch((e: unknown) => {
      if (e instanceof HttpError) return fail(res, e.status, e.code, e.message);
      const failure = storageFailure(e);
      // Not a fault of the request nor of the server's code: the database's own state, which
      // /readyz and the storage log lines already report.
      if (failure !== null && !res.headersSent) {
        return fail(res, 503, 'storage_unavailable', STORAGE_FAILURES[failure], { 'retry-after': '10' });
      }
      opts.onError?.(e);
      if (!res.headersSent) fail(res, 500, 'internal', 'internal error');
      else res.end();
    });
  });
  // A request Node refuses before any handler sees it (headers over its 16 KB, bytes that are
  // no HTTP, a request that did not arrive in time) is answered as every /api error is:
  // JSON with a code and a message, then the connection is closed.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: import('node:stream').Duplex) => {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const [status, reason, code, message] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'request_too_large', 'the request line and headers are larger than the server takes (16 KB); send a shorter query']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'request_timeout', 'the whole request did not arrive in time']
          : [400, 'Bad Request', 'bad_request', 'the request is not valid HTTP'];
    const body = JSON.stringify({ error: { code, message } });
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
  // SSE streams stay open; closing must not wait for them forever.
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const realPort = typeof addr === 'object' && addr ? addr.port : port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    server,
    url: `http://${shown}:${realPort}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}

async function dispatch(req: IncomingMessage, res: ServerResponse, routes: readonly Route[], token: string | null, allowed: AllowedHosts): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
  const methods = new Set<string>();
  for (const route of routes) {
    const params = matchPath(route.path, url.pathname);
    if (params === null) continue;
    methods.add(route.method);
    if (route.method !== method) continue;
    const refused = (route.anyHost ? null : hostProblem(req.headers, allowed)) ?? writeProblem(method, req.headers);
    if (refused) {
      // Not read: the connection is closed rather than kept for a body nobody wants.
      res.setHeader('connection', 'close');
      throw refused;
    }
    const auth = route.public || token === null ? 'ok' : authorized(req, url, token, route.queryToken === true && method === 'GET');
    if (auth !== 'ok') {
      // RFC 6750 §3: the scheme a client should use, and whether the one it sent was refused.
      const challenge = auth === 'missing' ? 'Bearer realm="hostwatch"' : 'Bearer realm="hostwatch", error="invalid_token"';
      return fail(res, 401, 'unauthorized', unauthorizedMessage(req, url, route.queryToken === true && method === 'GET'), { 'www-authenticate': challenge });
    }
    return route.handler({ raw: req, method, url, params }, res);
  }
  if (methods.size > 0) {
    // RFC 9110 §15.5.6: a 405 names the methods the resource takes (HEAD wherever GET is).
    const allow = [...methods].flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
    return fail(res, 405, 'method_not_allowed', `${method} is not allowed on ${url.pathname} (it takes ${allow})`, { allow });
  }
  fail(res, 404, 'not_found', `no such endpoint: ${url.pathname}`);
}

function matchPath(pattern: string | RegExp, path: string): string[] | null {
  if (typeof pattern === 'string') return pattern === path ? [] : null;
  const m = pattern.exec(path);
  return m ? m.slice(1) : null;
}

/**
 * Why a request was refused its token, with a hint for the two mistakes a token in the URL
 * invites: `access_token` sent to an endpoint that does not take it (only the stream does,
 * for EventSource, which cannot set headers), and a token not percent-encoded (a `+` in it
 * arrives as a space).
 */
function unauthorizedMessage(req: IncomingMessage, url: URL, queryToken: boolean): string {
  const required = 'a valid bearer token is required (Authorization: Bearer <server.token>)';
  if (req.headers.authorization !== undefined || !url.searchParams.has('access_token')) return required;
  if (!queryToken) return `${required}; access_token in the URL is taken by the event stream only (GET /api/events/stream)`;
  return `${required} or ?access_token=<server.token>, percent-encoded (encodeURIComponent): a + in a token arrives as a space otherwise`;
}

/**
 * Bearer token from the Authorization header (the scheme in any case: RFC 9110 §11.1), or
 * `access_token` in the query where the route takes it (the SSE stream: EventSource cannot
 * set headers). Compared in constant time: both sides are hashed to equal length.
 * `missing` when no bearer token was sent (no header, or another scheme such as Basic:
 * RFC 6750 §3.1 gives such a request no error code), `invalid` when one was and it is not
 * the server's.
 */
export function authorized(req: IncomingMessage, url: URL, token: string, queryToken: boolean): 'ok' | 'missing' | 'invalid' {
  const header = req.headers.authorization ?? '';
  const bearer = /^bearer +(\S.*)$/i.exec(header);
  const given = bearer ? bearer[1]! : queryToken ? (url.searchParams.get('access_token') ?? '') : '';
  if (given === '') return 'missing';
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b) && given.length > 0 ? 'ok' : 'invalid';
}
