/**
 * Website e-mail sending (spec 1 "Website e-mail sending"): the per-site `mail` family.
 * A PUT goes `pending`, then `active` on the next tick (or `error` when the secret is
 * "invalid": a provider that refuses the key); the key itself is never returned.
 */
import { LIMITS } from '../assumptions.js';
import type { Family } from '../resources.js';
import { bool, fail, int, invalid, ok, queryBool, reqStr, str, type Ctx } from '../routes.js';
import { DAY_MS, MINUTE_MS, isoAgo, isoUtc, msBetween, visible, type Visible } from './common.js';

export const MAIL_PROVIDERS = [
  { key: 'keyonly_1', name: 'Key-only provider 1', host: 'smtp.keyonly1.example', ports: [465, 587], default_port: 587, asks_user: false, asks_host: false, user_label: '', secret_label: 'API key', regions: null, docs: 'https://docs.example.com/mail/keyonly_1' },
  { key: 'keyonly_2', name: 'Key-only provider 2', host: 'smtp.keyonly2.example', ports: [587], default_port: 587, asks_user: false, asks_host: false, user_label: '', secret_label: 'API key', regions: null, docs: 'https://docs.example.com/mail/keyonly_2' },
  { key: 'keyonly_3', name: 'Key-only provider 3', host: 'smtp.keyonly3.example', ports: [465, 587], default_port: 465, asks_user: false, asks_host: false, user_label: '', secret_label: 'API key', regions: null, docs: 'https://docs.example.com/mail/keyonly_3' },
  { key: 'login_1', name: 'Login provider 1', host: 'smtp.login1.example', ports: [587], default_port: 587, asks_user: true, asks_host: false, user_label: 'SMTP login', secret_label: 'SMTP key', regions: ['us', 'eu'], docs: 'https://docs.example.com/mail/login_1' },
  { key: 'login_2', name: 'Login provider 2', host: 'email-smtp.{region}.login2.example', ports: [465, 587], default_port: 587, asks_user: true, asks_host: false, user_label: 'SMTP user name', secret_label: 'SMTP password', regions: ['us-east-1', 'eu-west-1', 'eu-central-1'], docs: 'https://docs.example.com/mail/login_2' },
  { key: 'login_3', name: 'Login provider 3', host: 'smtp.login3.example', ports: [587], default_port: 587, asks_user: true, asks_host: false, user_label: 'Login', secret_label: 'Password', regions: null, docs: 'https://docs.example.com/mail/login_3' },
  { key: 'smtp', name: 'Other SMTP server', host: '', ports: [465, 587], default_port: 587, asks_user: true, asks_host: true, user_label: 'User name', secret_label: 'Password', regions: null, docs: 'https://docs.example.com/mail/smtp' },
] as const;

export interface MailState {
  route: 'ours' | 'own';
  provider: string | null;
  provider_name: string | null;
  region: string | null;
  host: string | null;
  port: number | null;
  username: string | null;
  key_hint: string | null;
  from_address: string | null;
  force_from: boolean;
  enabled: boolean;
  locked_by_staff: boolean;
  state: 'pending' | 'active' | 'error';
  state_note: string;
  confirmed_at: string | null;
  last_test: { at: string; ok: boolean; to: string; message: string } | null;
  last_send: string | null;
  updated_at: string;
  /** Stored secret marker (never shown): whether a key is stored and whether the provider accepts it. */
  _secret_ok: boolean | null;
  _tests: string[];
}

const mail = (c: Ctx): MailState => c.res.site<MailState>('mail', c.siteId);

function view(s: MailState): Visible<MailState> {
  return visible(s);
}

export const mailFamily: Family<MailState> = {
  name: 'mail',
  per: 'site',
  seed: ({ rng, site, epoch }) => {
    const own = rng.chance(0.3);
    return {
      route: own ? 'own' : 'ours',
      provider: own ? 'keyonly_1' : null,
      provider_name: own ? 'Key-only provider 1' : null,
      region: null,
      host: own ? 'smtp.keyonly1.example' : null,
      port: own ? 587 : null,
      username: null,
      key_hint: own ? '…a1b2' : null,
      from_address: `noreply@${site?.domain ?? 'example.com'}`,
      force_from: true,
      enabled: true,
      locked_by_staff: false,
      state: 'active',
      state_note: '',
      confirmed_at: own ? isoAgo(epoch, rng.int(3, 90) * DAY_MS) : null,
      last_test: null,
      last_send: null,
      updated_at: isoUtc(epoch),
      _secret_ok: own ? true : null,
      _tests: [],
    };
  },
  actions: {
    /** Timer after a PUT: the site is switched; `error` when the provider refuses the key. */
    switched: (s, _args, a) => {
      if (s.state !== 'pending') return;
      s.state = s._secret_ok === false ? 'error' : 'active';
      s.state_note = s.state === 'error' ? 'the provider refused the key' : '';
      if (s.state === 'active') s.confirmed_at = a.iso();
      a.record('state', { state: s.state });
    },
    /** The provider starts refusing mail (args.note). */
    fail: (s, args, a) => {
      s.state = 'error';
      s.state_note = typeof args.note === 'string' ? args.note : 'the provider refused the key';
      a.record('state', { state: s.state });
      return view(s);
    },
  },
  routes: [
    { method: 'GET', path: '/mail-sending/providers', scope: 'sites:read', handler: () => ok(MAIL_PROVIDERS) },
    { method: 'GET', path: '/sites/{site_id}/mail-sending', scope: 'sites:read', handler: (c) => ok(view(mail(c))) },
    {
      method: 'PUT',
      path: '/sites/{site_id}/mail-sending',
      scope: 'sites:write',
      handler: (c) => {
        const s = mail(c);
        const key = reqStr(c, 'provider', { oneOf: MAIL_PROVIDERS.map((p) => p.key) });
        const p = MAIL_PROVIDERS.find((x) => x.key === key)!;
        const secret = str(c, 'secret', { min: 1, max: 500 });
        const username = str(c, 'username', { max: 200 });
        const region = str(c, 'region', { max: 40 });
        const host = str(c, 'host', { max: 253 });
        const port = int(c, 'port', { oneOf: [465, 587] });
        const from = str(c, 'from_address', { pattern: /^[^@\s]+@[^@\s]+$/ });
        const forceFrom = bool(c, 'force_from');
        const changed = key !== s.provider || (key === 'smtp' && host !== undefined && host !== s.host);
        if (secret === undefined && (changed || s._secret_ok === null)) invalid('secret', 'is required the first time and when the provider or server changes');
        if (p.asks_host && !(host ?? s.host)) invalid('host', 'is required for smtp');
        if (p.asks_user && !(username ?? s.username)) invalid('username', `is required for ${key}`);
        if (p.regions && region !== undefined && !(p.regions as readonly string[]).includes(region)) invalid('region', `must be one of ${p.regions.join(', ')}`, region);
        if (s.locked_by_staff) fail('unavailable', 'mail sending for this site is locked by staff');
        Object.assign(s, {
          route: 'own', provider: key, provider_name: p.name, region: region ?? (p.regions ? p.regions[0] : null), host: host ?? (key === 'smtp' ? s.host : p.host),
          port: port ?? p.default_port, username: username ?? s.username, from_address: from ?? s.from_address, force_from: forceFrom ?? true, enabled: true,
          state: 'pending', state_note: 'switching within a minute', updated_at: isoUtc(c.world.time()),
        });
        if (secret !== undefined) {
          s.key_hint = `…${secret.slice(-4)}`;
          s._secret_ok = !/invalid/i.test(secret);
        }
        c.res.actCtx('mail', c.siteId).later(1, 'switched');
        return ok(view(s));
      },
    },
    {
      method: 'DELETE',
      path: '/sites/{site_id}/mail-sending',
      scope: 'sites:write',
      handler: (c) => {
        const s = mail(c);
        const forget = queryBool(c, 'forget', false);
        s.route = 'ours';
        s.state = 'active';
        s.state_note = '';
        if (forget) Object.assign(s, { provider: null, provider_name: null, region: null, host: null, port: null, username: null, key_hint: null, _secret_ok: null });
        s.updated_at = isoUtc(c.world.time());
        return ok({ route: 'ours', provider: null });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/mail-sending/test',
      scope: 'sites:write',
      handler: (c) => {
        const s = mail(c);
        const to = reqStr(c, 'to', { pattern: /^[^@\s]+@[^@\s]+$/ });
        const now = c.world.time();
        s._tests = s._tests.filter((t) => msBetween(t, now) < 10 * MINUTE_MS);
        if (s._tests.length >= LIMITS.mail_tests_per_10_minutes) fail('rate_limited', 'at most 5 tests per site per 10 minutes');
        s._tests.push(isoUtc(now));
        const good = s.route === 'ours' || s.state === 'active';
        const message = good ? `sent to ${to}` : `not sent: ${s.state_note || 'the provider is not ready'}`;
        s.last_test = { at: isoUtc(now), ok: good, to, message };
        if (good) s.last_send = isoUtc(now);
        return ok({ ok: good, message });
      },
    },
  ],
};
