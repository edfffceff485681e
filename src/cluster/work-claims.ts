import type { Logger } from 'pino';
import type { WorkClaims } from '../scheduler/scheduler.js';
import type { SiteInfo } from '../sources/types.js';
import { ClusterRepo } from '../store/cluster-repo.js';
import type { Store } from '../store/db.js';
import type { Membership } from './membership.js';

/** The lease key of an entity of a source: the site id, or '' for the account. */
const keyOf = (e: SiteInfo | null): string => (e === null ? '' : String(e.id));

/**
 * How a fair share is split: each live member polls at most ⌈entities / members⌉ of a
 * source. Pure. Keeps what it holds up to that share (a member that polled an entity before
 * has it in memory), takes free entities (no lease, or a holder that is not live) up to it,
 * and gives back what it holds beyond it, so a member that joins gets its share from the
 * others' next cycles.
 */
export function shareOf(
  keys: readonly string[],
  leases: ReadonlyArray<{ entity: string; holder: string; live: boolean }>,
  me: string,
  members: number,
): { keep: string[]; take: string[]; release: string[] } {
  const fair = Math.ceil(keys.length / Math.max(1, members));
  const byEntity = new Map(leases.map((l) => [l.entity, l]));
  const mine = keys.filter((k) => byEntity.get(k)?.holder === me);
  const free = keys.filter((k) => {
    const l = byEntity.get(k);
    return l === undefined || (l.holder !== me && !l.live);
  });
  const keep = mine.slice(0, fair);
  return { keep, take: free.slice(0, Math.max(0, fair - keep.length)), release: mine.slice(fair) };
}

/**
 * Entity leases in the database: each due entity is polled by one live member. A member
 * claims at the start of each cycle of a source (shareOf), through conditional upserts that
 * take an entity only where nobody live holds it. A member that died holds nothing once its
 * lease ran out: the others take its entities at their next cycle (takeover within the
 * lease plus one interval). Entities that come back to this member after another held them
 * are forgotten in memory first (Poller.handedOver).
 */
export function clusterWorkClaims(store: Store, membership: Membership, onHandedOver: (source: string, entities: ReadonlyArray<number | null>) => void, log: Logger): WorkClaims {
  const repo = new ClusterRepo(store);
  /** What this member held after its last claim, per source (and under which member id). */
  const held = new Map<string, { member: string; keys: Set<string> }>();
  return {
    async claim(source, _dueAt, entities) {
      if (!membership.live(membership.marginMs)) return [];
      const me = membership.id;
      const keys = entities.map(keyOf);
      const [leases, members] = await Promise.all([repo.entityLeases(source), repo.liveCount()]);
      const share = shareOf(keys, leases, me, members);
      const taken = await repo.takeEntities(source, share.take, me);
      await repo.releaseEntities(source, share.release, me);
      const mine = new Set([...share.keep, ...taken]);
      const before = held.get(source);
      const fresh = [...mine].filter((k) => before?.member !== me || !before.keys.has(k));
      held.set(source, { member: me, keys: mine });
      const claimed = entities.filter((e) => mine.has(keyOf(e)));
      if (fresh.length > 0) {
        onHandedOver(source, fresh.map((k) => (k === '' ? null : Number(k))));
        log.debug({ source, taken: fresh.length, released: share.release.length, polls: claimed.length, members }, 'entity leases claimed');
      }
      return claimed;
    },
    stillHeld(source) {
      // Claimed under this member id, whose lease still has the margin work must leave.
      return held.get(source)?.member === membership.id && membership.live(membership.marginMs);
    },
  };
}
