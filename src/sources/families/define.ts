/**
 * Small constructors for source declarations: most sources differ only in name, scope,
 * path and interval, plus a few fields passed in `extra`.
 */
import type { SourceDef } from '../types.js';

/** A per-site endpoint `/sites/{site_id}/...`, one whole object (or, with `key`, a list) per site. */
export function site(name: string, scope: string, path: string, everyMs: number, extra: Partial<SourceDef> = {}): SourceDef {
  return { name, scope, per: 'site', path, paged: false, volatile: [], defaultEveryMs: everyMs, ...extra };
}

/** A view: no request of its own, it re-reads what `origin` fetched, under its own entity. */
export function view(name: string, origin: SourceDef, entity: string, extra: Partial<SourceDef> = {}): SourceDef {
  return {
    name,
    scope: origin.scope,
    per: origin.per,
    from: origin.name,
    path: '',
    paged: false,
    entity,
    volatile: [],
    defaultEveryMs: origin.defaultEveryMs,
    ...extra,
  };
}

/** A plan/usage endpoint: one whole object per account. */
export function plan(name: string, scope: string, path: string, everyMs: number, extra: Partial<SourceDef> = {}): SourceDef {
  return { name, scope, per: 'account', path, paged: false, volatile: [], defaultEveryMs: everyMs, ...extra };
}

/** An account-wide list of records keyed by `id`, its entity named like its path. */
export function list(name: string, scope: string, path: string, everyMs: number, extra: Partial<SourceDef> = {}): SourceDef {
  return { name, scope, per: 'account', path, paged: false, key: 'id', entity: path.slice(1), volatile: [], defaultEveryMs: everyMs, ...extra };
}

/** A detail endpoint `{path}/{id}` of every record of `parent`. */
export function detail(name: string, parent: SourceDef, everyMs: number, extra: Partial<SourceDef> = {}): SourceDef {
  return {
    name,
    scope: parent.scope,
    per: 'record',
    parent: parent.name,
    path: `${parent.path}/{id}`,
    paged: false,
    entity: `${parent.entity ?? parent.name}/{id}`,
    volatile: [],
    defaultEveryMs: everyMs,
    ...extra,
  };
}
