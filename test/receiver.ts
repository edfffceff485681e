/**
 * A real webhook receiver for delivery tests: a node:http server on loopback that checks
 * every request the way a careful customer would — the Standard Webhooks signature with the
 * `standardwebhooks` library, the body as a CloudEvent with the `cloudevents` SDK — and
 * records everything, so tests can compare what arrived with what should have.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudEvent, HTTP, type CloudEventV1 } from 'cloudevents';
import { Webhook } from 'standardwebhooks';
import type { HostwatchEvent } from '../src/events/types.js';

/** A Standard Webhooks secret: `whsec_` + base64 of 32 bytes. */
export const TEST_SECRET = `whsec_${Buffer.from('hostwatch-test-secret-32-bytes!!').toString('base64')}`;

/** What the receiver answers (after `delayMs`: a slow receiver). `hold` keeps the request open until the receiver closes. */
export type Answer = { status: number; headers?: Record<string, string>; body?: string; delayMs?: number } | 'hold';

/** One request as received. */
export interface Received {
  /** 1-based arrival number over the receiver's life. */
  n: number;
  at: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** The webhook-id header ('' when missing). */
  id: string;
  /** Why the signature did not verify, or null when it did. */
  signatureError: string | null;
  /** Why the body is not a valid CloudEvent 1.0, or null when it is. */
  cloudEventError: string | null;
  /** The event as the cloudevents SDK parsed it (null when it could not). */
  cloudEvent: CloudEventV1<unknown> | null;
  /** The body as JSON (null when it is not JSON). */
  event: HostwatchEvent | null;
  /** What was answered ('hold' while held). */
  answer: number | 'hold';
}

export interface Receiver {
  url: string;
  port: number;
  /** Every request, in arrival order (including rejected ones). */
  requests: Received[];
  /** Requests answered 2xx: what hostwatch may consider delivered. */
  accepted(): Received[];
  /** Distinct webhook-ids among accepted requests. */
  acceptedIds(): Set<string>;
  /** How this receiver answers from now on. */
  respond(fn: (r: Received) => Answer): void;
  close(): Promise<void>;
}

function flatHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/**
 * Start a receiver on 127.0.0.1 (port 0 = any free port). A request whose signature does
 * not verify is answered 401 and recorded with the reason, so a test sees it either way.
 */
export async function startReceiver(opts: { secret?: string; port?: number; answer?: (r: Received) => Answer } = {}): Promise<Receiver> {
  const verifier = new Webhook(opts.secret ?? TEST_SECRET);
  const requests: Received[] = [];
  const held = new Set<ServerResponse>();
  let answer: (r: Received) => Answer = opts.answer ?? (() => ({ status: 200 }));

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = flatHeaders(req);
      const r: Received = {
        n: requests.length + 1,
        at: Date.now(),
        method: req.method ?? '',
        path: req.url ?? '',
        headers,
        body,
        id: headers['webhook-id'] ?? '',
        signatureError: null,
        cloudEventError: null,
        cloudEvent: null,
        event: null,
        answer: 200,
      };
      try {
        verifier.verify(body, headers);
      } catch (e) {
        r.signatureError = (e as Error).message;
      }
      try {
        const parsed = HTTP.toEvent({ headers: req.headers, body });
        if (!(parsed instanceof CloudEvent)) throw new Error('not a single CloudEvent (a batch?)');
        parsed.validate();
        r.cloudEvent = parsed;
      } catch (e) {
        const err = e as Error & { errors?: unknown };
        r.cloudEventError = `${err.message}${err.errors ? ` ${JSON.stringify(err.errors)}` : ''}`;
      }
      try {
        r.event = JSON.parse(body) as HostwatchEvent;
      } catch {
        r.event = null;
      }
      requests.push(r);
      const a: Answer = r.signatureError ? { status: 401, body: 'bad signature' } : answer(r);
      if (a === 'hold') {
        r.answer = 'hold';
        held.add(res);
        res.on('close', () => held.delete(res));
        return;
      }
      const reply = (): void => {
        r.answer = a.status;
        res.writeHead(a.status, { 'content-type': 'text/plain', ...a.headers });
        res.end(a.body ?? '');
      };
      if (!a.delayMs) return reply();
      r.answer = 'hold';
      held.add(res);
      const timer = setTimeout(reply, a.delayMs);
      res.on('close', () => {
        clearTimeout(timer);
        held.delete(res);
      });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  const accepted = (): Received[] => requests.filter((r) => typeof r.answer === 'number' && r.answer >= 200 && r.answer < 300);
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    requests,
    accepted,
    acceptedIds: () => new Set(accepted().map((r) => r.id)),
    respond(fn) {
      answer = fn;
    },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

/** A loopback port that nothing listens on (it was free a moment ago). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** Poll `cond` every `everyMs` until it is true; throw with `what` after `timeoutMs`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000, everyMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
