/**
 * DNS records, their publishing state and nameservers (spec 1 "DNS and nameservers"), the
 * per-site `dns` family. Writes are published at the provider on the next tick unless the
 * provider refuses the record; drift makes the provider refuse (and later accept) records.
 */
import { CDN_PROVIDER } from '../assumptions.js';
import type { Family } from '../resources.js';
import { bool, fail, find, int, invalid, ok, reqStr, str, type Ctx } from '../routes.js';
import { DAY_MS, HOUR_MS, byIdOrRandom, isoAgo, visible } from './common.js';

export const DNS_TYPES = ['A', 'AAAA', 'CNAME', 'TXT', 'MX', 'SRV', 'CAA', 'NS'] as const;
const CDN_NS = ['ns1.cdn-dns.example', 'ns2.cdn-dns.example'];
const OTHER_PROVIDERS = ['registrar-dns', 'self-hosted'];

export interface DnsRecord {
  id: number;
  type: string;
  name: string;
  value: string;
  proxied: boolean;
  updated_at: string;
  parts: Record<string, unknown>;
}

export interface PublishingError {
  record_id: number;
  name: string;
  type: string;
  error: string;
}

export interface DnsState {
  records: DnsRecord[];
  publishing: { provider: string; errors: PublishingError[]; last_synced_at: string };
  nameservers: {
    current: string[];
    required: string[];
    pointed: boolean;
    main_cloud: boolean;
    zone_expired: boolean;
    dns_provider: string;
    checked_at: string;
    autopilot: null | Record<string, unknown>;
  };
}

const dns = (c: Ctx): DnsState => c.res.site<DnsState>('dns', c.siteId);

/** Whether a site's DNS is on the CDN provider (security and bot check need it). */
export function onCdn(s: DnsState): boolean {
  return s.nameservers.dns_provider === CDN_PROVIDER;
}

function partsOf(type: string, value: string, extra: { priority?: number; weight?: number; port?: number; caa_flags?: number; caa_tag?: string }): Record<string, unknown> {
  switch (type) {
    case 'MX':
      return { priority: extra.priority ?? 10, target: value };
    case 'SRV':
      return { priority: extra.priority ?? 10, weight: extra.weight ?? 0, port: extra.port ?? 0, target: value };
    case 'CAA':
      return { flags: extra.caa_flags ?? 0, tag: extra.caa_tag ?? 'issue', value };
    default:
      return {};
  }
}

/** Checks `value` against its type, like the panel does. */
function checkValue(type: string, value: string): void {
  const ok4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(value);
  if (type === 'A' && !(ok4 && ok4.slice(1).every((p) => Number(p) <= 255))) invalid('value', 'must be an IPv4 address for an A record', value);
  if (type === 'AAAA' && !/^[0-9a-f:]+$/i.test(value)) invalid('value', 'must be an IPv6 address for an AAAA record', value);
  if (['CNAME', 'MX', 'SRV', 'NS'].includes(type) && !/^[a-z0-9.-]+\.?$/i.test(value)) invalid('value', `must be a host name for a ${type} record`, value);
  if (value.length === 0) invalid('value', 'must not be empty');
}

/** Reads and checks the body fields shared by create and change. */
function recordInput(c: Ctx, s: DnsState, base: DnsRecord | undefined): Omit<DnsRecord, 'id' | 'updated_at'> {
  const type = str(c, 'type', { required: !base, oneOf: DNS_TYPES }) ?? (base as DnsRecord).type;
  const name = str(c, 'name', { required: !base, min: 1, max: 253 }) ?? (base as DnsRecord).name;
  const value = str(c, 'value', { required: !base, max: 2048 }) ?? (base?.type === 'MX' || base?.type === 'SRV' ? String(base.parts.target) : (base as DnsRecord).value);
  checkValue(type, value);
  const extra = {
    priority: int(c, 'priority', { min: 0, max: 65535 }) ?? (base?.parts.priority as number | undefined),
    weight: int(c, 'weight', { min: 0, max: 65535 }) ?? (base?.parts.weight as number | undefined),
    port: int(c, 'port', { min: 0, max: 65535 }) ?? (base?.parts.port as number | undefined),
    caa_flags: int(c, 'caa_flags', { oneOf: [0, 128] }) ?? (base?.parts.flags as number | undefined),
    caa_tag: str(c, 'caa_tag', { oneOf: ['issue', 'issuewild', 'iodef'] }) ?? (base?.parts.tag as string | undefined),
  };
  const proxied = bool(c, 'proxied') ?? base?.proxied ?? false;
  if (proxied && !onCdn(s)) invalid('proxied', 'is only possible where the DNS provider is the CDN provider', proxied);
  if (proxied && !['A', 'AAAA', 'CNAME'].includes(type)) invalid('proxied', 'applies to A, AAAA and CNAME records only', proxied);
  return { type, name, value, proxied, parts: partsOf(type, value, extra) };
}

/** Schedules publishing at the provider (a job to follow, as the spec says). */
function schedulePublish(c: Ctx): number {
  const job = c.world.addJob({ type: 'dns_publish', site_id: c.siteId, state: 'running' });
  c.res.actCtx('dns', c.siteId).later(1, 'publish', { job: job.id });
  return job.id;
}

export const dnsFamily: Family<DnsState> = {
  name: 'dns',
  per: 'site',
  seed: ({ rng, siteId, site, epoch }) => {
    const id = siteId as number;
    const provider = rng.chance(0.8) ? CDN_PROVIDER : rng.pick(OTHER_PROVIDERS);
    const at = isoAgo(epoch, rng.int(1, 90) * DAY_MS);
    const domain = site?.domain ?? `site-${id}.example.com`;
    const records: DnsRecord[] = [
      { id: id * 100 + 1, type: 'A', name: '@', value: `192.0.2.${(id % 250) + 1}`, proxied: provider === CDN_PROVIDER, updated_at: at, parts: {} },
      { id: id * 100 + 2, type: 'CNAME', name: 'www', value: domain, proxied: provider === CDN_PROVIDER, updated_at: at, parts: {} },
      { id: id * 100 + 3, type: 'MX', name: '@', value: 'mx.mail.example.net', proxied: false, updated_at: at, parts: { priority: 10, target: 'mx.mail.example.net' } },
      { id: id * 100 + 4, type: 'TXT', name: '@', value: 'v=spf1 include:mail.example.net ~all', proxied: false, updated_at: at, parts: {} },
    ];
    const required = provider === CDN_PROVIDER ? CDN_NS : [`ns1.${provider}.example`, `ns2.${provider}.example`];
    return {
      records,
      publishing: { provider, errors: [], last_synced_at: isoAgo(epoch, rng.int(1, 48) * HOUR_MS) },
      nameservers: {
        current: [...required],
        required,
        pointed: true,
        main_cloud: provider === CDN_PROVIDER,
        zone_expired: false,
        dns_provider: provider,
        checked_at: isoAgo(epoch, rng.int(1, 23) * HOUR_MS),
        autopilot: null,
      },
    };
  },
  normalize: (s) => {
    s.nameservers.pointed = s.nameservers.required.every((ns) => s.nameservers.current.includes(ns));
  },
  actions: {
    /** The provider accepts everything pending: errors clear, last_synced_at moves (args.job finishes). */
    publish: (s, args, a) => {
      const had = s.publishing.errors.length;
      s.publishing.errors = [];
      s.publishing.last_synced_at = a.iso();
      if (typeof args.job === 'number') a.world.setJobState(args.job, 'done');
      if (had > 0) a.record('published', { cleared: had });
    },
    /** The provider refuses a record (args.record_id, default a random one; args.error). */
    refuse: (s, args, a) => {
      const r = byIdOrRandom(s.records, args.record_id, a.rng);
      if (!r) return undefined;
      const error = typeof args.error === 'string' ? args.error : a.rng.pick(['record conflicts with an existing CNAME', 'TXT value too long for the provider', 'provider rejected the record: invalid target']);
      const entry = { record_id: r.id, name: r.name, type: r.type, error };
      s.publishing.errors = [...s.publishing.errors.filter((e) => e.record_id !== r.id), entry];
      a.record('refused', entry);
      return entry;
    },
    /** Nameservers stop pointing at the required ones (args.current: the new list). */
    unpoint: (s, args, a) => {
      s.nameservers.current = Array.isArray(args.current) ? (args.current as string[]) : ['ns1.parking.example', 'ns2.parking.example'];
      s.nameservers.pointed = false;
      s.nameservers.checked_at = a.iso();
      a.record('unpointed', { current: s.nameservers.current });
    },
    /** Nameservers point at the required ones again. */
    point: (s, _args, a) => {
      s.nameservers.current = [...s.nameservers.required];
      s.nameservers.pointed = true;
      s.nameservers.checked_at = a.iso();
      a.record('pointed', {});
    },
    /** The zone expires at the provider (args.expired false re-creates it). */
    expire_zone: (s, args, a) => {
      s.nameservers.zone_expired = args.expired !== false;
      a.record('zone_expired', { expired: s.nameservers.zone_expired });
    },
  },
  drift: (s, a) => {
    if (s.publishing.errors.length > 0) {
      if (a.rng.chance(0.5)) dnsFamily.actions!.publish!(s, {}, a);
    } else if (a.rng.chance(0.4)) {
      dnsFamily.actions!.refuse!(s, {}, a);
    }
  },
  driftWeight: 2,
  routes: [
    { method: 'GET', path: '/sites/{site_id}/nameservers', scope: 'dns:read', handler: (c) => ok(dns(c).nameservers) },
    { method: 'GET', path: '/sites/{site_id}/dns', scope: 'dns:read', handler: (c) => ok(visible(dns(c))) },
    {
      method: 'POST',
      path: '/sites/{site_id}/dns',
      scope: 'dns:write',
      handler: (c) => {
        const s = dns(c);
        const input = recordInput(c, s, undefined);
        if (s.nameservers.zone_expired) fail('conflict', 'the DNS zone expired at the provider; re-create it from the site page');
        const clash = s.records.find((r) => r.name === input.name && (r.type === 'CNAME' || input.type === 'CNAME'));
        if (clash) fail('conflict', `a CNAME cannot share the name ${input.name} with another record (record ${clash.id})`);
        const record: DnsRecord = { id: c.res.nextId('dns'), ...input, updated_at: c.res.actCtx('dns', c.siteId).iso() };
        s.records.push(record);
        c.world.note('dns.record_added', c.siteId, { record });
        schedulePublish(c);
        return ok(record, 201);
      },
    },
    {
      method: 'PATCH',
      path: '/sites/{site_id}/dns/{record_id}',
      scope: 'dns:write',
      handler: (c) => {
        const s = dns(c);
        const record = find(s.records, c.params.record_id as number, 'DNS record');
        Object.assign(record, recordInput(c, s, record), { updated_at: c.res.actCtx('dns', c.siteId).iso() });
        c.world.note('dns.record_changed', c.siteId, { record });
        schedulePublish(c);
        return ok(record);
      },
    },
    {
      method: 'DELETE',
      path: '/sites/{site_id}/dns/{record_id}',
      scope: 'dns:write',
      handler: (c) => {
        const s = dns(c);
        const record = find(s.records, c.params.record_id as number, 'DNS record');
        s.records = s.records.filter((r) => r !== record);
        s.publishing.errors = s.publishing.errors.filter((e) => e.record_id !== record.id);
        c.world.note('dns.record_removed', c.siteId, { id: record.id });
        schedulePublish(c);
        return ok({ deleted: true, id: record.id });
      },
    },
  ],
};

/** Fails 409 unless the site's DNS is on the CDN provider (security, bot check). */
export function requireCdn(c: Ctx): void {
  if (!onCdn(c.res.site<DnsState>('dns', c.siteId))) fail('conflict', 'the site is not on the CDN provider', { reason: 'not_on_cdn' });
}
