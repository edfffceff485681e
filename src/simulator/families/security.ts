/**
 * Site security (spec 1 "Site security") and bot check ("Bot check"): per-site families
 * `security` and `botcheck`. Both need the site's DNS on the CDN provider: security answers
 * 409 otherwise; bot check reads `available: false` and refuses to switch on.
 */
import { ticksFor } from '../assumptions.js';
import type { Family } from '../resources.js';
import { bool, fail, int, invalid, ok, reqStr, requireConfirm, str, strings, type Ctx } from '../routes.js';
import { displayUtc as displayUtcOf } from '../time.js';
import { DAY_MS, HOUR_MS, isoAgo, isoIn, isoUtc, label, visible } from './common.js';
import { onCdn, requireCdn, type DnsState } from './dns.js';
import type { SiteTools } from './sites.js';

const PHASES = ['http_request_firewall_custom', 'http_ratelimit'] as const;
const AUTO_OFF: Record<string, number | null> = { '1h': HOUR_MS, '6h': 6 * HOUR_MS, '24h': 24 * HOUR_MS, never: null };
const FIELDS: Record<string, { label: string; ops: string[] }> = {
  'ip.src': { label: 'IP address', ops: ['eq', 'ne', 'in'] },
  'ip.geoip.country': { label: 'Country', ops: ['eq', 'ne', 'in'] },
  'http.request.uri.path': { label: 'URI path', ops: ['eq', 'ne', 'contains', 'starts_with'] },
  'http.user_agent': { label: 'User agent', ops: ['eq', 'contains'] },
  'http.request.method': { label: 'Request method', ops: ['eq', 'ne'] },
};
const ACTIONS: Record<string, Record<string, string>> = {
  http_request_firewall_custom: { block: 'Block', managed_challenge: 'Managed challenge', js_challenge: 'JS challenge', skip: 'Skip' },
  http_ratelimit: { block: 'Block', managed_challenge: 'Managed challenge' },
};
const OPS: Record<string, string> = { eq: '==', ne: '!=', contains: 'contains', starts_with: 'starts_with', in: 'in' };

export interface Rule {
  id: string;
  name: string;
  action: string;
  enabled: boolean;
  expression: string;
}

export interface SecurityState {
  under_attack: { available: boolean; on: boolean; external: boolean; auto_off_at: string | null; enabled_at: string | null; level: string; error: string };
  bot_protection: { ai: boolean; fight: boolean; status: 'applying' | 'active'; label: string };
  rules: { status: string; plan: string; limits: { custom: number; ratelimit: number }; http_request_firewall_custom: Rule[]; http_ratelimit: Rule[] };
  login_path: string;
  changes_paused: boolean;
  /** Ids of rules made outside this dashboard (read-only here). */
  _external: string[];
}

const security = (c: Ctx): SecurityState => {
  requireCdn(c);
  return c.res.site<SecurityState>('security', c.siteId);
};

function view(s: SecurityState): Record<string, unknown> {
  return { ...visible(s), auto_off_choices: Object.keys(AUTO_OFF), fields: FIELDS, ratelimit_fields: ['ip.src', 'http.request.uri.path'], actions: ACTIONS };
}

/** Reads the `rule` object of a create/change body into a Rule and its phase. */
function ruleInput(c: Ctx, id: string): { phase: (typeof PHASES)[number]; rule: Rule } {
  const raw = c.body.rule;
  if (typeof raw !== 'object' || raw === null) return invalid('rule', 'is required (an object)');
  const r = { ...c, body: raw as Record<string, unknown> };
  const phase = (str(r, 'phase', { oneOf: PHASES }) ?? 'http_request_firewall_custom') as (typeof PHASES)[number];
  const name = reqStr(r, 'name', { min: 1, max: 120 });
  const action = reqStr(r, 'action', { oneOf: Object.keys(ACTIONS[phase] ?? {}) });
  const enabled = bool(r, 'enabled') ?? true;
  let expression: string;
  if (r.body.mode === 'advanced') expression = reqStr(r, 'expression', { min: 1, max: 4096 });
  else {
    const builder = r.body.builder as { match?: unknown; conditions?: unknown } | undefined;
    if (!builder || typeof builder !== 'object') return invalid('rule.builder', 'is required unless mode is advanced');
    if (builder.match !== 'all' && builder.match !== 'any') invalid('rule.builder.match', 'must be all or any', builder.match);
    if (!Array.isArray(builder.conditions) || builder.conditions.length === 0) return invalid('rule.builder.conditions', 'must be a non-empty array');
    const allowed = phase === 'http_ratelimit' ? ['ip.src', 'http.request.uri.path'] : Object.keys(FIELDS);
    expression = builder.conditions
      .map((cond: { field?: unknown; op?: unknown; value?: unknown }, i: number) => {
        const field = String(cond.field);
        if (!allowed.includes(field)) invalid(`rule.builder.conditions[${i}].field`, `must be one of ${allowed.join(', ')}`, cond.field);
        if (!FIELDS[field]?.ops.includes(String(cond.op))) invalid(`rule.builder.conditions[${i}].op`, `must be one of ${FIELDS[field]?.ops.join(', ')}`, cond.op);
        if (typeof cond.value !== 'string') invalid(`rule.builder.conditions[${i}].value`, 'must be a string', cond.value);
        return `(${field} ${OPS[String(cond.op)]} "${cond.value}")`;
      })
      .join(builder.match === 'all' ? ' and ' : ' or ');
  }
  if (phase === 'http_ratelimit') int(r, 'requests_per_period', { required: true, min: 1, max: 10_000 });
  return { phase, rule: { id, name, action, enabled, expression } };
}

function locate(s: SecurityState, id: string): { list: Rule[]; index: number } {
  for (const phase of PHASES) {
    const index = s.rules[phase].findIndex((r) => r.id === id);
    if (index >= 0) return { list: s.rules[phase], index };
  }
  return fail('not_found', `no rule ${id}`);
}

function editable(s: SecurityState, id: string): { list: Rule[]; index: number } {
  const at = locate(s, id);
  if (s._external.includes(id)) invalid('rule_id', 'names a rule made outside this dashboard; only rules made here can be changed', id);
  if (s.changes_paused) fail('unavailable', 'rule changes are paused for this site');
  return at;
}

function rulesChanged(c: Ctx, s: SecurityState, what: string, id: string): ReturnType<typeof ok> {
  c.world.note('security.rules_changed', c.siteId, { what, rule_id: id });
  return ok(s.rules, what === 'added' ? 201 : 200);
}

export const securityFamily: Family<SecurityState> = {
  name: 'security',
  per: 'site',
  seed: ({ rng, siteId }) => {
    const rules: Rule[] = [{ id: `r${siteId}a`, name: 'Block bad bots', action: 'block', enabled: true, expression: '(http.user_agent contains "BadBot")' }];
    const external = rng.chance(0.3) ? [`x${siteId}`] : [];
    if (external.length > 0) rules.push({ id: external[0] as string, name: 'Made at the CDN', action: 'managed_challenge', enabled: true, expression: '(ip.geoip.country in {"XX"})' });
    return {
      under_attack: { available: true, on: false, external: false, auto_off_at: null, enabled_at: null, level: 'medium', error: '' },
      bot_protection: { ai: rng.chance(0.5), fight: rng.chance(0.3), status: 'active', label: 'Active' },
      rules: { status: 'ok', plan: 'free', limits: { custom: 5, ratelimit: 1 }, http_request_firewall_custom: rules, http_ratelimit: [] },
      login_path: '/wp-login.php',
      changes_paused: false,
      _external: external,
    };
  },
  actions: {
    /** Timer: Under Attack reaches its auto-off time (only if it was not switched since: args.enabled_at). */
    auto_off: (s, args, a) => {
      if (!s.under_attack.on || s.under_attack.enabled_at !== args.enabled_at) return;
      s.under_attack = { ...s.under_attack, on: false, enabled_at: null, auto_off_at: null };
      a.record('under_attack', { on: false, auto: true });
    },
    /** Under Attack switches on (args.on false: off; args.external: switched at the CDN, not here). */
    under_attack: (s, args, a) => {
      const on = args.on !== false;
      s.under_attack = { ...s.under_attack, on, external: on && args.external === true, enabled_at: on ? a.iso() : null, auto_off_at: on ? isoIn(a.now(), HOUR_MS) : null };
      a.record('under_attack', { on });
      return s.under_attack;
    },
    /** Timer: bot protection applied. */
    applied: (s) => {
      s.bot_protection.status = 'active';
      s.bot_protection.label = 'Active';
    },
    /** A rule is added at the CDN, outside this dashboard (args.name). */
    external_rule: (s, args, a) => {
      const id = `x${a.nextId()}`;
      s.rules.http_request_firewall_custom.push({ id, name: typeof args.name === 'string' ? args.name : 'Made at the CDN', action: 'block', enabled: true, expression: '(ip.src in {192.0.2.0/24})' });
      s._external.push(id);
      a.record('external_rule', { id });
      return { id };
    },
  },
  drift: (s, a) => {
    if (!onCdn(a.res.site<DnsState>('dns', a.siteId as number))) return;
    if (s.under_attack.on) securityFamily.actions!.under_attack!(s, { on: false }, a);
    else if (a.rng.chance(0.3)) securityFamily.actions!.under_attack!(s, { external: true }, a);
  },
  driftWeight: 1,
  routes: [
    { method: 'GET', path: '/sites/{site_id}/security', scope: 'security:read', handler: (c) => ok(view(security(c))) },
    {
      method: 'PUT',
      path: '/sites/{site_id}/security/under-attack',
      scope: 'security:write',
      handler: (c) => {
        const s = security(c);
        const on = bool(c, 'on', { required: true }) as boolean;
        const autoOff = str(c, 'auto_off', { oneOf: Object.keys(AUTO_OFF) }) ?? 'never';
        if (!s.under_attack.available) fail('unavailable', 'Under Attack mode is not available for this site');
        if (s.changes_paused) fail('unavailable', 'changes are paused for this site');
        const now = c.world.time();
        const ms = AUTO_OFF[autoOff];
        s.under_attack = { ...s.under_attack, on, external: false, enabled_at: on ? isoUtc(now) : null, auto_off_at: on && ms ? isoIn(now, ms) : null };
        if (on && ms) c.res.actCtx('security', c.siteId).later(ticksFor(ms / 60_000), 'auto_off', { enabled_at: s.under_attack.enabled_at });
        c.world.note('security.under_attack', c.siteId, { on });
        return ok(s.under_attack);
      },
    },
    {
      method: 'PUT',
      path: '/sites/{site_id}/security/bots',
      scope: 'security:write',
      handler: (c) => {
        const s = security(c);
        const setting = reqStr(c, 'setting', { oneOf: ['ai', 'fight'] }) as 'ai' | 'fight';
        const on = bool(c, 'on', { required: true }) as boolean;
        s.bot_protection = { ...s.bot_protection, [setting]: on, status: 'applying', label: 'Applying' };
        c.res.actCtx('security', c.siteId).later(1, 'applied');
        return ok(s.bot_protection);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/security/rules',
      scope: 'security:write',
      handler: (c) => {
        const s = security(c);
        if (s.changes_paused) fail('unavailable', 'rule changes are paused for this site');
        const { phase, rule } = ruleInput(c, `r${c.res.nextId('security')}`);
        const limit = phase === 'http_ratelimit' ? s.rules.limits.ratelimit : s.rules.limits.custom;
        if (s.rules[phase].length >= limit) fail('conflict', `the plan allows ${limit} rule(s) in ${phase}`, { limit });
        s.rules[phase].push(rule);
        return rulesChanged(c, s, 'added', rule.id);
      },
    },
    {
      method: 'PUT',
      path: '/sites/{site_id}/security/rules/{rule_id}',
      scope: 'security:write',
      handler: (c) => {
        const s = security(c);
        const id = String(c.params.rule_id);
        const at = editable(s, id);
        const { rule } = ruleInput(c, id);
        at.list[at.index] = rule;
        return rulesChanged(c, s, 'changed', id);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/security/rules/{rule_id}/{action}',
      scope: 'security:write',
      handler: (c) => {
        const s = security(c);
        const id = String(c.params.rule_id);
        const action = String(c.params.action);
        if (!['enable', 'disable', 'up', 'down'].includes(action)) invalid('action', 'must be one of enable, disable, up, down', action);
        const { list, index } = editable(s, id);
        const rule = list[index] as Rule;
        if (action === 'enable' || action === 'disable') rule.enabled = action === 'enable';
        else {
          const to = action === 'up' ? index - 1 : index + 1;
          if (to >= 0 && to < list.length) [list[index], list[to]] = [list[to] as Rule, rule];
        }
        return rulesChanged(c, s, action, id);
      },
    },
    {
      method: 'DELETE',
      path: '/sites/{site_id}/security/rules/{rule_id}',
      scope: 'security:write',
      handler: (c) => {
        const s = security(c);
        const id = String(c.params.rule_id);
        const { list, index } = editable(s, id);
        list.splice(index, 1);
        return rulesChanged(c, s, 'deleted', id);
      },
    },
  ],
};

const FORMS = ['login', 'register', 'lostpassword', 'comments', 'formplugin_a', 'formplugin_b'];
const MODES = ['managed', 'non-interactive', 'invisible'];

export interface BotcheckState {
  status: 'active' | 'off' | 'waiting';
  account: string;
  sitekey: string | null;
  mode: string;
  forms: string[];
  extra_hosts: string[];
  last_error: string;
  revoked: boolean;
  verified_at: string;
  rotated_at: string;
  paused: boolean;
  /** Whether the provider account has room for another widget (false: switching on waits). */
  _room: boolean;
}

function eligible(c: Ctx): boolean {
  return onCdn(c.res.site<DnsState>('dns', c.siteId)) && c.res.site<SiteTools>('site', c.siteId).app === 'cms';
}

function botcheckView(c: Ctx, s: BotcheckState): Record<string, unknown> {
  const rest = visible(s);
  const domain = c.world.getSite(c.siteId)?.domain ?? '';
  return {
    available: eligible(c),
    ...rest,
    status_label: s.status === 'active' ? 'Active' : s.status === 'waiting' ? 'Waiting for room' : 'Off',
    hosts: s.status === 'off' ? [] : [domain, ...s.extra_hosts],
    modes: MODES.map((key) => ({ key, label: label(key) })),
    all_forms: FORMS.map((key) => ({ key, label: label(key) })),
  };
}

const botcheck = (c: Ctx): BotcheckState => c.res.site<BotcheckState>('botcheck', c.siteId);

function switchable(c: Ctx, s: BotcheckState): void {
  if (!eligible(c)) fail('conflict', 'bot check is for CMS sites whose DNS is on the CDN provider');
  if (s.revoked) fail('conflict', 'bot check was revoked by the team; contact support');
}

export const botcheckFamily: Family<BotcheckState> = {
  name: 'botcheck',
  per: 'site',
  seed: ({ rng, siteId, epoch }) => {
    const active = rng.chance(0.4);
    return {
      status: active ? 'active' : 'off',
      account: 'platform',
      sitekey: active ? `0x4AAA${String(siteId).padStart(6, '0')}` : null,
      mode: 'managed',
      forms: active ? ['login', 'register', 'lostpassword'] : [],
      extra_hosts: [],
      last_error: '',
      revoked: false,
      verified_at: active ? displayUtcOf(new Date(epoch.getTime() - rng.int(1, 30) * DAY_MS)) : '',
      rotated_at: active ? isoAgo(epoch, rng.int(30, 300) * DAY_MS) : '',
      paused: false,
      _room: true,
    };
  },
  actions: {
    /** Timer: a waiting switch-on finishes by itself. */
    room: (s, _args, a) => {
      if (s.status === 'waiting') {
        s.status = 'active';
        s.sitekey = `0x4AAA${String(a.siteId).padStart(6, '0')}`;
        s.verified_at = displayUtcOf(a.now());
      }
    },
    /** The team revokes bot check (args.revoked false restores it). */
    revoke: (s, args, a) => {
      s.revoked = args.revoked !== false;
      if (s.revoked) s.last_error = 'revoked by the team';
      a.record('revoked', { revoked: s.revoked });
      return { revoked: s.revoked };
    },
  },
  routes: [
    { method: 'GET', path: '/sites/{site_id}/botcheck', scope: 'botcheck:read', handler: (c) => ok(botcheckView(c, botcheck(c))) },
    {
      method: 'POST',
      path: '/sites/{site_id}/botcheck',
      scope: 'botcheck:write',
      handler: (c) => {
        const s = botcheck(c);
        const mode = str(c, 'mode', { oneOf: MODES }) ?? 'managed';
        const forms = strings(c, 'forms') ?? FORMS;
        const bad = forms.find((f) => !FORMS.includes(f));
        if (bad) invalid('forms', `must hold only ${FORMS.join(', ')}`, bad);
        const extra = strings(c, 'extra_hosts', { max: 4 }) ?? s.extra_hosts;
        switchable(c, s);
        Object.assign(s, { mode, forms, extra_hosts: extra, last_error: '' });
        if (s.status === 'off') {
          if (s._room) {
            s.status = 'active';
            s.sitekey = `0x4AAA${String(c.siteId).padStart(6, '0')}`;
            s.verified_at = displayUtcOf(c.world.time());
          } else {
            s.status = 'waiting';
            c.res.actCtx('botcheck', c.siteId).later(2, 'room');
          }
        }
        c.world.note('botcheck.on', c.siteId, { status: s.status });
        return ok(botcheckView(c, s));
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/botcheck/rotate',
      scope: 'botcheck:write',
      handler: (c) => {
        const s = botcheck(c);
        switchable(c, s);
        if (s.status !== 'active') fail('conflict', 'bot check is not on');
        s.rotated_at = isoUtc(c.world.time());
        return ok(botcheckView(c, s));
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/botcheck/disable',
      scope: 'botcheck:write',
      handler: (c) => {
        requireConfirm(c);
        const s = botcheck(c);
        if (s.status === 'off') fail('conflict', 'bot check is already off');
        Object.assign(s, { status: 'off', sitekey: null, forms: [] });
        c.world.note('botcheck.off', c.siteId, {});
        return ok(botcheckView(c, s));
      },
    },
  ],
};

