/**
 * Resource families: the part of the world behind every endpoint beyond sites, health,
 * usage, backups and jobs. A family is data (name, per site or account, seed, routes,
 * actions, drift); this module gives them one mechanism for lazily seeded state, ids,
 * scheduled transitions ("timers"), seeded drift and the generic control patch.
 *
 * Determinism: a family's initial state is drawn from its own stream derived from
 * (world seed, site id, family name) and dated from the world's epoch, so reading a
 * resource never changes what the world does next; drift and timers draw from one
 * separate stream, so the world is a function of its seed, its clock and the calls made.
 */
import { Random } from './random.js';
import type { CompiledRoute, RouteDef } from './routes.js';
import { compileRoute } from './routes.js';
import { isoUtc } from './time.js';
import type { SiteRecord } from './types.js';
import { SimulatorError, type World } from './world.js';

/** Ids of records created after seeding start here, above every seeded id (site id × 100 + n). */
export const CREATED_ID_BASE = 10_000_000;
/** How many sites family drift touches per tick, like the health drift: O(1) per tick at any size. */
export const FAMILY_DRIFT_SITES_PER_TICK = 2;

/** What a family's seed function gets. */
export interface SeedCtx {
  rng: Random;
  /** null for an account-level family. */
  siteId: number | null;
  site: SiteRecord | undefined;
  /** The world's creation time: seeded timestamps are relative to it, never to "now". */
  epoch: Date;
  world: World;
}

/** What actions, timers and drift get. */
export interface ActCtx {
  world: World;
  res: Resources;
  /** The drift stream (shared by every family, advanced in a fixed order). */
  rng: Random;
  siteId: number | null;
  now(): Date;
  /** Current time as the API writes it. */
  iso(): string;
  tick: number;
  /** Runs `action` of this family (same site) `ticks` ticks from now. */
  later(ticks: number, action: string, args?: Args): void;
  /** A fresh id for a record of this family. */
  nextId(): number;
  /** Appends to the world's history as `<family>.<kind>`. */
  record(kind: string, detail: Record<string, unknown>): void;
}

export type Args = Record<string, unknown>;
// Family state shapes differ per family; the registry stores them untyped and each family types its own.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyState = any;

/** One resource family. */
export interface Family<S = AnyState> {
  name: string;
  per: 'site' | 'account';
  seed(s: SeedCtx): S;
  routes: RouteDef[];
  /** Named events: used by drift, timers, API writes and `POST /_sim/.../do/{family}/{action}`. */
  actions?: Record<string, (s: S, args: Args, a: ActCtx) => unknown>;
  /** Seeded random change; called for a few sites (or the account) per tick. */
  drift?: (s: S, a: ActCtx) => void;
  /** Relative chance of being picked by drift (default 1). */
  driftWeight?: number;
  /** Recomputes derived fields after a control patch. */
  normalize?: (s: S, world: World) => void;
  /** For account families holding records of many sites: drop a removed site's records. */
  onSiteRemoved?: (s: S, siteId: number) => void;
}

interface Timer {
  due: number;
  family: string;
  siteId: number | null;
  action: string;
  args: Args;
}

/** One patch operation of the control interface. */
export interface PatchOp {
  op: 'set' | 'merge' | 'add' | 'remove';
  /** Dotted ("records.12.state") or an array of segments; in arrays a segment matches a record's id, key, platform, code, url or path. */
  path: string | (string | number)[];
  value?: unknown;
}

/** The state of every family, created on first use. */
export class Resources {
  readonly families = new Map<string, Family>();
  readonly routes: CompiledRoute[] = [];
  /** Seeded random drift of the families on tick (the control interface can switch it off). */
  driftEnabled = true;
  private readonly states = new Map<string, AnyState>();
  private readonly ids = new Map<string, number>();
  private timers: Timer[] = [];
  private readonly rng: Random;

  constructor(
    private readonly world: World,
    families: readonly Family[],
  ) {
    this.rng = new Random(deriveSeed(world.seed, 0, 'drift'));
    for (const f of families) {
      this.families.set(f.name, f);
      for (const r of f.routes) this.routes.push(compileRoute(r));
    }
  }

  /** Seeds every account-level family now (the world calls this once its first sites exist), so later site changes do not change them. */
  seedAccountFamilies(): void {
    for (const f of this.families.values()) if (f.per === 'account') this.stateOf(f.name, null);
  }

  /** A family's definition, or 404 for an unknown name. */
  family(name: string): Family {
    const f = this.families.get(name);
    if (!f) throw new SimulatorError('not_found', `no family ${name}; known: ${[...this.families.keys()].join(', ')}`);
    return f;
  }

  /** The state of a per-site family for a site that exists (seeded on first use). */
  site<S>(family: string, siteId: number): S {
    return this.stateOf(family, siteId) as S;
  }

  /** The state of an account-level family (seeded on first use). */
  account<S>(family: string): S {
    return this.stateOf(family, null) as S;
  }

  /** The state for `siteId` (null = account); 404 when the family's level and the scope disagree or the site is unknown. */
  stateOf(name: string, siteId: number | null): AnyState {
    const f = this.family(name);
    if ((f.per === 'site') !== (siteId !== null)) {
      throw new SimulatorError('not_found', f.per === 'site' ? `family ${name} is per site` : `family ${name} is account-level`);
    }
    const key = stateKey(name, siteId);
    let state = this.states.get(key);
    if (state === undefined) {
      const site = siteId === null ? undefined : this.world.getSite(siteId);
      if (siteId !== null && !site) throw new SimulatorError('not_found', `no site ${siteId}`);
      state = f.seed({ rng: new Random(deriveSeed(this.world.seed, siteId ?? 0, name)), siteId, site, epoch: this.world.epoch, world: this.world });
      this.states.set(key, state);
    }
    return state;
  }

  /** Whether a site family has been seeded yet (for cross-family reads that must not seed). */
  has(name: string, siteId: number | null): boolean {
    return this.states.has(stateKey(name, siteId));
  }

  /** A fresh record id of a family. */
  nextId(family: string): number {
    const id = (this.ids.get(family) ?? CREATED_ID_BASE) + 1;
    this.ids.set(family, id);
    return id;
  }

  /** The context actions run with. */
  actCtx(family: string, siteId: number | null): ActCtx {
    const world = this.world;
    return {
      world,
      res: this,
      rng: this.rng,
      siteId,
      now: () => world.time(),
      iso: () => isoUtc(world.time()),
      tick: world.ticks,
      later: (ticks, action, args = {}) => void this.timers.push({ due: world.ticks + Math.max(1, ticks), family, siteId, action, args }),
      nextId: () => this.nextId(family),
      record: (kind, detail) => world.note(`${family}.${kind}`, siteId ?? undefined, detail),
    };
  }

  /** Runs a named action of a family for a site (or the account); returns what it returns. */
  act(family: string, siteId: number | null, action: string, args: Args = {}): unknown {
    const f = this.family(family);
    const fn = f.actions?.[action];
    if (!fn) throw new SimulatorError('not_found', `family ${family} has no action ${action}; known: ${Object.keys(f.actions ?? {}).join(', ') || 'none'}`);
    return fn(this.stateOf(family, siteId), args, this.actCtx(family, siteId));
  }

  /** Applies control patch operations to a family's state, then its normalize hook; recorded in history. */
  patch(family: string, siteId: number | null, ops: PatchOp[]): AnyState {
    const state = this.stateOf(family, siteId);
    // Work on a copy so a bad op in the middle leaves nothing half-applied.
    const draft = structuredClone(state);
    for (const op of ops) applyOp(draft, op, () => this.nextId(family));
    this.family(family).normalize?.(draft, this.world);
    Object.keys(state).forEach((k) => delete state[k]);
    Object.assign(state, draft);
    this.world.note(`${family}.patched`, siteId ?? undefined, { ops });
    return state;
  }

  /** One step: due timers in order, then (unless switched off) seeded drift of a few sites and one account family. */
  tick(tick: number): void {
    const due = this.timers.filter((t) => t.due <= tick);
    if (due.length > 0) this.timers = this.timers.filter((t) => t.due > tick);
    for (const t of due) {
      if (t.siteId !== null && !this.world.getSite(t.siteId)) continue;
      this.act(t.family, t.siteId, t.action, t.args);
    }
    if (!this.driftEnabled) return;
    const sites = this.world.sites;
    const siteFamilies = [...this.families.values()].filter((f) => f.per === 'site' && f.drift);
    for (let i = 0; i < FAMILY_DRIFT_SITES_PER_TICK && sites.length > 0 && siteFamilies.length > 0; i++) {
      const siteId = this.rng.pick(sites).id;
      const f = this.pickWeighted(siteFamilies);
      f.drift?.(this.stateOf(f.name, siteId), this.actCtx(f.name, siteId));
    }
    const accountFamilies = [...this.families.values()].filter((f) => f.per === 'account' && f.drift);
    if (accountFamilies.length > 0) {
      const f = this.pickWeighted(accountFamilies);
      f.drift?.(this.stateOf(f.name, null), this.actCtx(f.name, null));
    }
  }

  /** Drops a removed site's state and timers, and its records in account families. */
  forgetSite(siteId: number): void {
    for (const f of this.families.values()) {
      this.states.delete(stateKey(f.name, siteId));
      if (f.per === 'account' && f.onSiteRemoved && this.states.has(stateKey(f.name, null))) f.onSiteRemoved(this.stateOf(f.name, null), siteId);
    }
    this.timers = this.timers.filter((t) => t.siteId !== siteId);
  }

  /** Every seeded state and pending timer, as plain JSON. */
  snapshot(): { states: Record<string, unknown>; timers: Timer[] } {
    const states: Record<string, unknown> = {};
    for (const key of [...this.states.keys()].sort()) states[key] = this.states.get(key);
    return structuredClone({ states, timers: this.timers });
  }

  private pickWeighted(families: Family[]): Family {
    const weights: Record<string, number> = {};
    for (const f of families) weights[f.name] = f.driftWeight ?? 1;
    return this.family(this.rng.weighted(weights));
  }
}

function stateKey(family: string, siteId: number | null): string {
  return siteId === null ? family : `${family}@${siteId}`;
}

/** FNV-1a over "seed:site:name", so each family's seed stream is independent of every other. */
export function deriveSeed(seed: number, siteId: number, name: string): number {
  let h = 0x811c9dc5;
  for (const ch of `${seed}:${siteId}:${name}`) {
    h ^= ch.charCodeAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function segmentsOf(path: PatchOp['path']): string[] {
  const segs = Array.isArray(path) ? path.map(String) : String(path).split('.').filter((s) => s !== '');
  if (segs.length === 0) throw new SimulatorError('validation_failed', 'patch path must not be empty');
  return segs;
}

/** Steps into an object by key or into an array of records by `id` (or `[n]` for an index). */
function child(container: unknown, seg: string, where: string): unknown {
  if (Array.isArray(container)) return container[indexIn(container, seg, where)];
  if (typeof container === 'object' && container !== null) return (container as Record<string, unknown>)[seg];
  throw new SimulatorError('validation_failed', `patch path ${where}: cannot step into a ${container === null ? 'null' : typeof container}`);
}

/** Record keys a patch path segment matches in an array, in this order (`[n]` is an index). */
const RECORD_KEYS = ['id', 'key', 'platform', 'code', 'url', 'path'] as const;

function indexIn(list: unknown[], seg: string, where: string): number {
  const m = /^\[(\d+)\]$/.exec(seg);
  let i = -1;
  if (m) i = Number(m[1]);
  else {
    for (const key of RECORD_KEYS) {
      i = list.findIndex((x) => typeof x === 'object' && x !== null && key in x && String((x as Record<string, unknown>)[key]) === seg);
      if (i >= 0) break;
    }
  }
  if (i < 0 || i >= list.length) throw new SimulatorError('not_found', `patch path ${where}: no record with ${RECORD_KEYS.join('/')} ${seg}`);
  return i;
}

function applyOp(root: unknown, op: PatchOp, nextId: () => number): void {
  if (!op || !['set', 'merge', 'add', 'remove'].includes(op.op)) throw new SimulatorError('validation_failed', 'op must be one of set, merge, add, remove');
  const segs = segmentsOf(op.path);
  const where = segs.join('.');
  let parent: unknown = root;
  for (const seg of segs.slice(0, -1)) parent = child(parent, seg, where);
  const last = segs[segs.length - 1] as string;
  const target = op.op === 'set' ? undefined : child(parent, last, where);
  switch (op.op) {
    case 'set':
      if (Array.isArray(parent)) parent[indexIn(parent, last, where)] = op.value;
      else if (typeof parent === 'object' && parent !== null) {
        // A misspelt field would otherwise be added, and served by the API as if it were real.
        if (!Object.hasOwn(parent, last)) {
          throw new SimulatorError('not_found', `patch path ${where}: no field ${last}; there: ${Object.keys(parent).join(', ')}`);
        }
        (parent as Record<string, unknown>)[last] = op.value;
      } else throw new SimulatorError('validation_failed', `patch path ${where}: parent is not an object`);
      return;
    case 'merge':
      if (typeof target !== 'object' || target === null || typeof op.value !== 'object' || op.value === null) {
        throw new SimulatorError('validation_failed', `patch path ${where}: merge needs an object at the path and as the value`);
      }
      Object.assign(target, op.value);
      return;
    case 'add': {
      if (!Array.isArray(target)) throw new SimulatorError('validation_failed', `patch path ${where}: add needs an array at the path`);
      const value = op.value;
      // Records added by a test get an id like any other, unless the test chose one.
      if (typeof value === 'object' && value !== null && !Array.isArray(value) && !('id' in value) && target.some((x) => typeof x === 'object' && x !== null && 'id' in x)) {
        (value as Record<string, unknown>).id = nextId();
      }
      target.push(value);
      return;
    }
    case 'remove':
      if (Array.isArray(parent)) parent.splice(indexIn(parent, last, where), 1);
      else if (typeof parent === 'object' && parent !== null && last in parent) delete (parent as Record<string, unknown>)[last];
      else throw new SimulatorError('not_found', `patch path ${where}: nothing to remove`);
      return;
  }
}

/** Reads `{ops: [...]}` or the shorthand `{set: {path: value}}` (both may be given) from a control body. */
export function patchOpsOf(body: Record<string, unknown>): PatchOp[] {
  const ops: PatchOp[] = [];
  if (body.ops !== undefined) {
    if (!Array.isArray(body.ops)) throw new SimulatorError('validation_failed', 'ops must be an array of {op, path, value}');
    ops.push(...(body.ops as PatchOp[]));
  }
  if (body.set !== undefined) {
    if (typeof body.set !== 'object' || body.set === null) throw new SimulatorError('validation_failed', 'set must be an object of path: value');
    for (const [path, value] of Object.entries(body.set)) ops.push({ op: 'set', path, value });
  }
  if (ops.length === 0) throw new SimulatorError('validation_failed', 'give ops: [{op, path, value}] or set: {path: value}');
  return ops;
}
