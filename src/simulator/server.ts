/**
 * The HTTP shell around Api and the control interface: splits the URL, records the request,
 * applies injected faults, and writes the Reply. All simulated behaviour lives elsewhere.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { handleControl, type ControlContext, type RequestRecord } from './control.js';
import type { FaultSpec } from './faults.js';
import { decodeCursor } from './paging.js';
import { codeForStatus, errorReply, type Reply } from './reply.js';
import type { Body } from './routes.js';

const API_PREFIX = '/api/v1';
const CONTROL_PREFIX = '/_sim';
const MAX_CONTROL_BODY = 1_000_000;
/** Large enough for the spec's 25 MB file upload plus multipart overhead. */
const MAX_API_BODY = 27 * 1024 * 1024;

export interface ListenerContext extends ControlContext {
  now: () => Date;
  /** How many request records to keep (the oldest go first). */
  maxRequests: number;
  /** S9: ETags and 304s on GET (false: a server without validators). */
  etags: boolean;
}

/** The pieces of a running listener that close() must stop. */
export interface Listener {
  onRequest(req: IncomingMessage, res: ServerResponse): void;
  /** Cancels delayed (latency-fault) answers, so close() does not wait on them. */
  cancelPending(): void;
}

/** Builds the node:http request listener for one simulator. */
export function createListener(ctx: ListenerContext): Listener {
  const pending = new Set<NodeJS.Timeout>();
  let requestSeq = 0;

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    const requestId = `sim-${(++requestSeq).toString(16).padStart(8, '0')}`;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const rawQuery = q < 0 ? '' : url.slice(q + 1);
    const method = req.method ?? 'GET';

    if (path === CONTROL_PREFIX || path.startsWith(`${CONTROL_PREFIX}/`)) {
      readJson(req).then(
        (body) => {
          let reply: Reply;
          try {
            reply = handleControl(ctx, method, path.slice(CONTROL_PREFIX.length), body);
          } catch (err) {
            reply = errorReply('internal_error', `simulator control failed: ${String(err)}`, undefined, 500);
          }
          send(res, requestId, reply);
        },
        (err: unknown) => send(res, requestId, errorReply('validation_failed', `bad control request body: ${String(err)}`)),
      );
      return;
    }

    const query = new URLSearchParams(rawQuery);
    const entry: RequestRecord = { method, path, query: rawQuery === '' ? {} : Object.fromEntries(query), at: ctx.now().toISOString(), conditional: req.headers['if-none-match'] !== undefined, status: 0 };
    record(ctx, entry);
    res.once('finish', () => (entry.status = res.statusCode));
    if (path !== API_PREFIX && !path.startsWith(`${API_PREFIX}/`)) {
      req.resume();
      send(res, requestId, errorReply('not_found', `no endpoint ${path}; the API lives under ${API_PREFIX}`));
      return;
    }

    const apiPath = path.slice(API_PREFIX.length);
    const plan = ctx.faults.take(apiPath, pageNumber(query.get('cursor')), method);
    readApiBody(req).then(
      (body) => {
        const answer = (): void => {
          if (plan.action?.kind === 'reset') {
            req.socket.destroy();
            return;
          }
          if (plan.action?.kind === 'oversize') {
            sendOversize(res, requestId, plan.action.bytes ?? 64 * 1024 * 1024, plan.action.chunked === true);
            return;
          }
          let reply: Reply;
          try {
            reply =
              body instanceof Error
                ? errorReply('validation_failed', `the request body is not valid JSON: ${body.message}`)
                : applyFault(plan.action, () => ctx.api.handle(method, apiPath, query, req.headers.authorization, body));
          } catch (err) {
            // A simulator bug must answer 500, not take down the process hosting the demo or the tests.
            reply = errorReply('internal_error', `simulator failed: ${String(err)}`, undefined, 500);
          }
          send(res, requestId, method === 'GET' && ctx.etags ? conditional(reply, req.headers['if-none-match']) : reply);
        };
        if (plan.delayMs <= 0) {
          answer();
          return;
        }
        const timer = setTimeout(() => {
          pending.delete(timer);
          answer();
        }, plan.delayMs);
        pending.add(timer);
      },
      (err: unknown) => send(res, requestId, errorReply('too_large', `request body rejected: ${String(err)}`)),
    );
  }

  return {
    onRequest,
    cancelPending(): void {
      for (const timer of pending) clearTimeout(timer);
      pending.clear();
    },
  };
}

/** Failing faults answer without running the handler, so an injected 500 on a POST changes nothing. */
function applyFault(fault: FaultSpec | undefined, handle: () => Reply): Reply {
  switch (fault?.kind) {
    case 'status': {
      const status = fault.status ?? 500;
      return errorReply(codeForStatus(status), `injected fault: HTTP ${status}`, undefined, status);
    }
    case 'rate_limit': {
      const reply = errorReply('rate_limited', 'injected fault: too many requests');
      reply.headers = { 'retry-after': String(fault.retry_after ?? 1) };
      return reply;
    }
    case 'truncated': {
      const reply = handle();
      // Any proper prefix of a JSON object is invalid JSON; the length header matches, so only parsing fails.
      return { status: 200, body: reply.body.slice(0, Math.floor(reply.body.length / 2)) };
    }
    case 'body':
      return { status: fault.status ?? 200, body: fault.body ?? '' };
    case 'nested': {
      const reply = handle();
      return reply.status === 200 && typeof reply.body === 'string' ? { ...reply, body: nestedBody(reply.body, fault.depth ?? 100_000) } : reply;
    }
    default:
      return handle();
  }
}

/**
 * A reply whose `data` (or a list's first record) gains a field `nested` holding arrays
 * `depth` levels deep: valid JSON of the right shape that a recursive reader cannot walk.
 * Built as text, since the simulator must not recurse over it either.
 */
function nestedBody(body: string, depth: number): string {
  const mark = '\u0000nested\u0000';
  const reply = JSON.parse(body) as { data?: unknown };
  const target = Array.isArray(reply.data) ? reply.data[0] : reply.data;
  if (target === null || typeof target !== 'object' || Array.isArray(target)) return body;
  (target as Record<string, unknown>)['nested'] = mark;
  return JSON.stringify(reply).replace(JSON.stringify(mark), `${'['.repeat(depth)}${']'.repeat(depth)}`);
}

/** The page a request asks for: 1 without a cursor, 0 (matches no page fault) for a cursor we did not issue. */
function pageNumber(rawCursor: string | null): number {
  if (rawCursor === null || rawCursor === '') return 1;
  return decodeCursor(rawCursor)?.page ?? 0;
}

/**
 * S9 (src/simulator/assumptions.ts): a 200 GET carries a weak ETag of its body; a matching
 * If-None-Match answers 304 with no body, so a client can poll cheaply.
 */
function conditional(reply: Reply, ifNoneMatch: string | undefined): Reply {
  if (reply.status !== 200) return reply;
  const etag = `W/"${createHash('sha1').update(reply.body).digest('base64url')}"`;
  const headers = { ...reply.headers, etag };
  const given = ifNoneMatch?.split(',').map((t) => t.trim());
  if (given && (given.includes(etag) || given.includes('*') || given.includes(etag.slice(2)))) return { status: 304, body: '', headers };
  return { ...reply, headers };
}

function record(ctx: ListenerContext, entry: RequestRecord): void {
  if (ctx.maxRequests <= 0) return;
  ctx.requests.push(entry);
  // Trim in batches so recording stays O(1) amortised.
  if (ctx.requests.length > ctx.maxRequests * 1.1 + 10) ctx.requests.splice(0, ctx.requests.length - ctx.maxRequests);
}

/**
 * A 200 reply of `bytes` bytes of valid JSON (`{"data":{"padding":"xxx…"}}`), written in
 * 64 KB chunks as the client reads them, so the simulator never holds it whole. `chunked`:
 * no Content-Length, the client learns the size only by reading.
 */
function sendOversize(res: ServerResponse, requestId: string, bytes: number, chunked: boolean): void {
  const head = '{"data":{"padding":"';
  const tail = '"}}';
  const fill = Math.max(0, bytes - head.length - tail.length);
  res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': requestId, ...(chunked ? {} : { 'content-length': head.length + fill + tail.length }) });
  // The client hangs up once it has read enough: that is expected, not an error.
  res.on('error', () => undefined);
  const CHUNK = 64 * 1024;
  const block = Buffer.alloc(CHUNK, 'x');
  let left = fill;
  res.write(head);
  const pump = (): void => {
    while (left > 0 && !res.destroyed) {
      const n = Math.min(CHUNK, left);
      left -= n;
      if (!res.write(n === CHUNK ? block : block.subarray(0, n))) {
        res.once('drain', pump);
        return;
      }
    }
    if (!res.destroyed) res.end(tail);
  };
  pump();
}

function send(res: ServerResponse, requestId: string, reply: Reply): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(
    reply.status,
    reply.status === 304
      ? { 'x-request-id': requestId, ...reply.headers }
      : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(reply.body), 'x-request-id': requestId, ...reply.headers },
  );
  res.end(reply.body);
}

/**
 * An API request body: JSON (the usual case), `{raw}` bytes for octet-stream and multipart
 * uploads (files/content), or the parse Error (answered 422 after faults are applied).
 */
async function readApiBody(req: IncomingMessage): Promise<Body | Error> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_API_BODY) throw new Error(`body larger than ${MAX_API_BODY} bytes`);
    chunks.push(chunk as Buffer);
  }
  const raw = Buffer.concat(chunks);
  const type = String(req.headers['content-type'] ?? '');
  if (type.startsWith('application/octet-stream') || type.startsWith('multipart/form-data')) return { raw, contentType: type };
  const text = raw.toString('utf8').trim();
  if (text === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return new Error('the body must be a JSON object');
    return parsed as Body;
  } catch (e) {
    return e as Error;
  }
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_CONTROL_BODY) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('body must be a JSON object');
  return parsed as Record<string, unknown>;
}
