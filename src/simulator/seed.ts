/**
 * The initial records of one site, drawn from the world's seeded stream. Seeding is
 * not a change, so nothing here is written to the world's history.
 */
import type { Random } from './random.js';
import { DAY_MS, HOUR_MS, MINUTE_MS, before, displayUtc, isoUtc } from './time.js';
import type { BackupRecord, HealthRecord, SiteRecord, UsageRecord } from './types.js';

const WORDS = ['bakery', 'studio', 'garden', 'travel', 'dental', 'coffee', 'yoga', 'photo', 'craft', 'bikes', 'legal', 'pets'];
const TLDS = ['example.com', 'example.net', 'example.org'];
const PLAN_DISK_MIB = [5120, 10240, 20480, 51200];
const ADDON_DISK_MIB = 10240;
const MIB = 1_048_576;

/** Labels for the named online statuses; A8: other statuses get their own name capitalised. */
export function onlineLabel(status: string): string {
  switch (status) {
    case 'online':
      return 'Online';
    case 'offline':
      return 'Offline';
    case 'slow':
      return 'Slow';
    case 'paused':
      return 'Paused';
    default:
      return status.charAt(0).toUpperCase() + status.slice(1);
  }
}

/** A site record; most domains are `site-<id>.example.com`, about one in five varies so tests see real-looking names. */
export function seedSite(rng: Random, id: number, now: Date, partial: Partial<SiteRecord> = {}): SiteRecord {
  let domain = `site-${id}.example.com`;
  let name = `Site ${id}`;
  if (rng.chance(0.2)) {
    const a = rng.pick(WORDS);
    const b = rng.pick(WORDS);
    // The id keeps varied domains unique without a lookup over all sites.
    domain = `${a}-${b}-${id}.${rng.pick(TLDS)}`;
    name = `${capitalise(a)} ${capitalise(b)}`;
  }
  const age = rng.int(30, 1500) * DAY_MS + rng.int(0, 86_399) * 1000;
  return {
    id,
    domain: partial.domain ?? domain,
    name: partial.name ?? name,
    state: partial.state ?? 'live',
    created_at: partial.created_at ?? isoUtc(before(now, age)),
  };
}

/** A healthy site: online, integrity checked within the last day, no problems. */
export function seedHealth(rng: Random, siteId: number, now: Date): HealthRecord {
  const checked = before(now, rng.int(0, 23) * HOUR_MS + rng.int(0, 59) * MINUTE_MS);
  return {
    site_id: siteId,
    online: { status: 'online', label: onlineLabel('online') },
    integrity: { checked: displayUtc(checked), status: 'ok', findings: [], problems: 0 },
  };
}

/** Usage well under the limits (5-75% of disk), so a fresh world raises no usage alerts. */
export function seedUsage(rng: Random, siteId: number, now: Date): UsageRecord {
  const included = rng.pick(PLAN_DISK_MIB);
  const addon = rng.chance(0.1) ? ADDON_DISK_MIB : 0;
  const limit = included + addon;
  const used = Math.round(limit * (0.05 + rng.float() * 0.7));
  const usage: UsageRecord = {
    site_id: siteId,
    state: 'active',
    frozen: false,
    over: [],
    disk: {
      used_mib: used,
      limit_mib: limit,
      included_mib: included,
      addon_mib: addon,
      percent: 0,
      over: false,
      measured_at: isoUtc(before(now, rng.int(0, 5) * HOUR_MS)),
    },
    db: { used_mib: rng.int(20, 800), limit_mib: rng.pick([1024, 2048]) },
    inodes: { used: rng.int(5_000, 150_000), limit: rng.pick([250_000, 500_000]) },
    bandwidth: null,
    addons: [],
    busy: false,
  };
  recomputeUsage(usage);
  return usage;
}

/** Derived usage fields: percent (one decimal), disk.over (used > limit), and 'disk' in `over` when it is. */
export function recomputeUsage(usage: UsageRecord, over: readonly string[] = usage.over): void {
  const { disk } = usage;
  disk.percent = disk.limit_mib > 0 ? Math.round((disk.used_mib / disk.limit_mib) * 1000) / 10 : 0;
  disk.over = disk.used_mib > disk.limit_mib;
  const others = over.filter((what) => what !== 'disk');
  usage.over = disk.over ? ['disk', ...others] : others;
}

/** A plausible archive size for a site's current disk use. */
export function backupSize(rng: Random, usage: UsageRecord | undefined): number {
  const usedMib = usage?.disk.used_mib ?? 100;
  return Math.round(usedMib * MIB * (0.5 + rng.float() * 0.3));
}

/** 2-3 nightly automatic backups, oldest first (the world stores ascending ids; the API serves newest first). */
export function seedBackups(rng: Random, now: Date, usage: UsageRecord, nextId: () => number): BackupRecord[] {
  const count = rng.int(2, 3);
  // Nightly at 03:xx UTC, the newest the last night's that is over by now (an hour after
  // 03:00): a seeded site always has an Ok backup under 26 h old (backup.stale stays quiet).
  const lastNight = Math.floor((now.getTime() - 4 * HOUR_MS) / DAY_MS) * DAY_MS + 3 * HOUR_MS;
  const backups: BackupRecord[] = [];
  for (let daysAgo = count - 1; daysAgo >= 0; daysAgo--) {
    const at = new Date(lastNight - daysAgo * DAY_MS + rng.int(0, 59) * MINUTE_MS);
    backups.push({
      id: nextId(),
      created_at: isoUtc(at),
      type: 'Automatic',
      state: 'Ok',
      size_bytes: backupSize(rng, usage),
      is_blueprint: false,
      locked: false,
    });
  }
  return backups;
}

function capitalise(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}
