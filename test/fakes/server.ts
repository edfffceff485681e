/**
 * The loopback HTTP server every provider fake is built on: it records each request, asks
 * the provider's checker what is wrong with it (documented fields, headers, auth, limits),
 * answers a wrong request the way the provider does (its real error body), and otherwise
 * answers what the test scripted (a 429, a 500, a permanent error) or the provider's
 * success. Tests then read what arrived.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as it arrived. */
export interface Arrival {
  /** 1-based arrival number. */
  n: number;
  method: string;
  /** The path without the query. */
  path: string;
  query: URLSearchParams;
  headers: Record<string, string>;
  body: string;
  /** The body as JSON (undefined when it is not JSON). */
  json: unknown;
  /** What the provider's checker found wrong (empty: a request the provider takes). */
  problems: string[];
  /** The status answered ('hold' while held). */
  status: number | 'hold';
}

/** An answer: status, headers and a body (objects are sent as JSON). */
export type Reply = { status: number; headers?: Record<string, string>; body?: unknown } | 'hold';

export interface FakeSpec {
  /** What is wrong with a request; the first element's kind decides the answer via `refuse`. */
  check(a: Arrival): string[];
  /** The provider's answer to a request it refuses (its real error body). */
  refuse(a: Arrival, problems: string[]): Reply;
  /** The provider's answer to a request it takes. */
  accept(a: Arrival): Reply;
}

export interface Fake {
  /** The server's address (http://127.0.0.1:port). */
  origin: string;
  arrivals: Arrival[];
  /** Requests answered 2xx. */
  accepted(): Arrival[];
  /** Script the answers: return a Reply to answer instead of the provider, or undefined to let it answer. */
  respond(fn: (a: Arrival) => Reply | undefined): void;
  close(): Promise<void>;
}

function flatHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/** Start a fake on 127.0.0.1, port 0 (any free port). */
export async function startFake(spec: FakeSpec): Promise<Fake> {
  const arrivals: Arrival[] = [];
  const held = new Set<ServerResponse>();
  let script: (a: Arrival) => Reply | undefined = () => undefined;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', 'http://fake');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const a: Arrival = { n: arrivals.length + 1, method: req.method ?? '', path: url.pathname, query: url.searchParams, headers: flatHeaders(req), body, json, problems: [], status: 'hold' };
      a.problems = spec.check(a);
      arrivals.push(a);
      const reply = script(a) ?? (a.problems.length > 0 ? spec.refuse(a, a.problems) : spec.accept(a));
      if (reply === 'hold') {
        held.add(res);
        res.on('close', () => held.delete(res));
        return;
      }
      a.status = reply.status;
      const text = reply.body === undefined ? '' : typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
      res.writeHead(reply.status, { 'content-type': typeof reply.body === 'string' ? 'text/plain' : 'application/json', ...reply.headers });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    origin: `http://127.0.0.1:${port}`,
    arrivals,
    accepted: () => arrivals.filter((a) => typeof a.status === 'number' && a.status >= 200 && a.status < 300),
    respond(fn) {
      script = fn;
    },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        for (const r of held) r.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

/** A value at a dotted path of a JSON value. */
export function at(json: unknown, path: string): unknown {
  let v = json;
  for (const part of path.split('.')) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined;
  return v;
}

/** Problems for a string field: required or not, and its most characters. */
export function stringField(json: unknown, path: string, opts: { required?: boolean; max?: number } = {}): string[] {
  const v = at(json, path);
  if (v === undefined || v === null) return opts.required ? [`${path} is required`] : [];
  if (typeof v !== 'string') return [`${path} must be a string`];
  if (opts.max !== undefined && v.length > opts.max) return [`${path} is ${v.length} characters, more than ${opts.max}`];
  return [];
}
