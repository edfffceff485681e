/**
 * The HTTP shell around Api and the control interface: splits the URL, records the request,
 * applies injected faults, and writes the Reply. All simulated behaviour lives elsewhere.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Api } from './api.js';
import { handleControl, type ControlContext, type RequestRecord } from './control.js';
import type { FaultSpec } from './faults.js';
import { decodeCursor } from './paging.js';
import { codeForStatus, errorReply, type Reply } from './reply.js';

const API_PREFIX = '/api/v1';
const CONTROL_PREFIX = '/_sim';
const MAX_CONTROL_BODY = 1_000_000;

export interface ListenerContext extends ControlContext {
  api: Api;
  now: () => Date;
  /** How many request records to keep (the oldest go first). */
  maxRequests: number;
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
    record(ctx, { method, path, query: rawQuery === '' ? {} : Object.fromEntries(query), at: ctx.now().toISOString() });
    // The simulated API takes no bodies; drain so the connection can be reused.
    req.resume();
    if (path !== API_PREFIX && !path.startsWith(`${API_PREFIX}/`)) {
      send(res, requestId, errorReply('not_found', `no endpoint ${path}; the API lives under ${API_PREFIX}`));
      return;
    }

    const apiPath = path.slice(API_PREFIX.length);
    const plan = ctx.faults.take(apiPath, pageNumber(query.get('cursor')));
    const answer = (): void => {
      if (plan.action?.kind === 'reset') {
        req.socket.destroy();
        return;
      }
      let reply: Reply;
      try {
        reply = applyFault(plan.action, () => ctx.api.handle(method, apiPath, query, req.headers.authorization));
      } catch (err) {
        // A simulator bug must answer 500, not take down the process hosting the demo or the tests.
        reply = errorReply('internal_error', `simulator failed: ${String(err)}`, undefined, 500);
      }
      send(res, requestId, reply);
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
    default:
      return handle();
  }
}

/** The page a request asks for: 1 without a cursor, 0 (matches no page fault) for a cursor we did not issue. */
function pageNumber(rawCursor: string | null): number {
  if (rawCursor === null || rawCursor === '') return 1;
  return decodeCursor(rawCursor)?.page ?? 0;
}

function record(ctx: ListenerContext, entry: RequestRecord): void {
  if (ctx.maxRequests <= 0) return;
  ctx.requests.push(entry);
  // Trim in batches so recording stays O(1) amortised.
  if (ctx.requests.length > ctx.maxRequests * 1.1 + 10) ctx.requests.splice(0, ctx.requests.length - ctx.maxRequests);
}

function send(res: ServerResponse, requestId: string, reply: Reply): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(reply.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(reply.body),
    'x-request-id': requestId,
    ...reply.headers,
  });
  res.end(reply.body);
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
