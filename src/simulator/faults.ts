/**
 * Fault injection: make chosen API paths fail the ways a real server or network does
 * (5xx, slowness, 429, a cut-off body, a reset connection) or a hostile one does (a value
 * nested too deep for a recursive reader), so tests can prove that a
 * failed fetch is never read as a change.
 */
import { SimulatorError } from './world.js';

export type FaultKind = 'status' | 'latency' | 'rate_limit' | 'truncated' | 'reset' | 'nested' | 'body' | 'oversize';

export const FAULT_KINDS: readonly FaultKind[] = ['status', 'latency', 'rate_limit', 'truncated', 'reset', 'nested', 'body', 'oversize'];

export interface FaultSpec {
  /** Regex source matched against the path after /api/v1, e.g. '^/sites/3/health$'. */
  path: string;
  kind: FaultKind;
  /** For 'status'; default 500. */
  status?: number;
  /** For 'latency' (delay, then answer normally); default 1000. */
  ms?: number;
  /** Seconds, for 'rate_limit' (429 rate_limited with Retry-After); default 1. */
  retry_after?: number;
  /** For 'body': the reply's text, sent as it is (status `status`, default 200), instead of the real answer. */
  body?: string;
  /** For 'nested': how many levels deep the added value is; default 100,000. */
  depth?: number;
  /** Only on this 1-based page of a paged list (a request without a cursor is page 1). */
  page?: number;
  /** Only requests with this HTTP method (e.g. 'GET'); default every method. */
  method?: string;
  /** Apply this many times, then expire; default: until cleared. */
  times?: number;
  /** For 'oversize': the size of the 200 reply, a valid JSON `{"data": …}` padded to it; default 64 MB. */
  bytes?: number;
  /** For 'oversize': sent in chunks without Content-Length (the size shows only while reading). */
  chunked?: boolean;
}

/** A fault as stored: its id, the spec, and how many applications remain. */
export interface ActiveFault {
  id: string;
  spec: FaultSpec;
  remaining: number | null;
}

/** What one request gets: total added delay, then at most one failure. */
export interface FaultPlan {
  delayMs: number;
  action: FaultSpec | undefined;
}

/** The set of active faults; matching consumes `times` only for faults that actually apply. */
export class Faults {
  private readonly active: (ActiveFault & { regex: RegExp })[] = [];
  private nextId = 1;

  /** Adds a fault; throws SimulatorError('validation_failed') on a bad spec. Returns its id. */
  add(spec: FaultSpec): string {
    const clean = validate(spec);
    const id = `f${this.nextId++}`;
    this.active.push({ id, spec: clean, remaining: clean.times ?? null, regex: new RegExp(clean.path) });
    return id;
  }

  /** Removes one fault; false when no fault has that id. */
  remove(id: string): boolean {
    const i = this.active.findIndex((f) => f.id === id);
    if (i < 0) return false;
    this.active.splice(i, 1);
    return true;
  }

  /** Removes every fault. */
  clear(): void {
    this.active.length = 0;
  }

  /** The active faults, for inspection. */
  list(): ActiveFault[] {
    return this.active.map(({ id, spec, remaining }) => ({ id, spec: { ...spec }, remaining }));
  }

  /** Decides what happens to one request: every matching latency fault adds its delay, the first other match applies. */
  take(path: string, page: number, method = 'GET'): FaultPlan {
    const plan: FaultPlan = { delayMs: 0, action: undefined };
    if (this.active.length === 0) return plan;
    for (const fault of [...this.active]) {
      const { spec } = fault;
      if (spec.page !== undefined && spec.page !== page) continue;
      if (spec.method !== undefined && spec.method !== method) continue;
      if (!fault.regex.test(path)) continue;
      if (spec.kind === 'latency') plan.delayMs += spec.ms ?? 1000;
      else if (plan.action === undefined) plan.action = spec;
      else continue;
      if (fault.remaining !== null && --fault.remaining <= 0) this.remove(fault.id);
    }
    return plan;
  }
}

/** The keys a fault spec may have: FaultSpec's, every one (the type below fails the build on a key left out). */
const FAULT_KEYS = ['path', 'kind', 'method', 'body', 'status', 'ms', 'retry_after', 'depth', 'page', 'times', 'bytes', 'chunked'] as const satisfies ReadonlyArray<keyof FaultSpec>;
const EVERY_FAULT_KEY: Exclude<keyof FaultSpec, (typeof FAULT_KEYS)[number]> extends never ? true : never = true;
void EVERY_FAULT_KEY;

function validate(input: unknown): FaultSpec {
  if (typeof input !== 'object' || input === null) throw invalid('a fault must be an object');
  const spec = input as Record<string, unknown>;
  // A misspelt key (`statuss`) would be dropped, and the fault answer its default instead.
  const unknown = Object.keys(spec).filter((k) => !(FAULT_KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) throw invalid(`unknown key ${unknown.join(', ')}; a fault takes ${FAULT_KEYS.join(', ')}`);
  if (typeof spec.path !== 'string') throw invalid('path must be a regex source string');
  try {
    new RegExp(spec.path);
  } catch {
    throw invalid(`path is not a valid regex: ${spec.path}`);
  }
  if (!FAULT_KINDS.includes(spec.kind as FaultKind)) throw invalid(`kind must be one of ${FAULT_KINDS.join(', ')}`);
  const out: FaultSpec = { path: spec.path, kind: spec.kind as FaultKind };
  if (spec.method !== undefined) {
    if (typeof spec.method !== 'string' || !/^[A-Z]+$/.test(spec.method)) throw invalid('method must be an upper-case HTTP method such as GET');
    out.method = spec.method;
  }
  if (spec.body !== undefined) {
    if (typeof spec.body !== 'string' || spec.body.length > 1_000_000) throw invalid('body must be a string of at most 1,000,000 characters');
    out.body = spec.body;
  }
  copyInt(spec, out, 'status', 100, 599);
  copyInt(spec, out, 'ms', 0, 600_000);
  copyInt(spec, out, 'retry_after', 0, 86_400);
  copyInt(spec, out, 'depth', 1, 10_000_000);
  copyInt(spec, out, 'page', 1, 1_000_000);
  copyInt(spec, out, 'times', 1, 1_000_000_000);
  copyInt(spec, out, 'bytes', 64, 1_073_741_824);
  if (spec.chunked !== undefined) {
    if (typeof spec.chunked !== 'boolean') throw invalid('chunked must be true or false');
    out.chunked = spec.chunked;
  }
  return out;
}

function copyInt(from: Record<string, unknown>, to: FaultSpec, key: 'status' | 'ms' | 'retry_after' | 'depth' | 'page' | 'times' | 'bytes', min: number, max: number): void {
  const v = from[key];
  if (v === undefined || v === null) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(`${key} must be an integer from ${min} to ${max}`);
  }
  to[key] = v;
}

function invalid(message: string): SimulatorError {
  return new SimulatorError('validation_failed', message);
}
