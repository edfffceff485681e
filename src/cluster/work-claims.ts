import type { Logger } from 'pino';
import type { WorkClaims } from '../scheduler/scheduler.js';
import type { SiteInfo } from '../sources/types.js';
import { ClusterRepo } from '../store/cluster-repo.js';
import type { Store } from '../store/db.js';
import type { Membership } from './membership.js';

/** The lease key of an entity of a source: the site id, or '' for the account. */
const keyOf = (e: SiteInfo | null): string => (e === null ? '' : String(e.id));

/**
 * How a fair share is split: each live member polls about ⌈entities / members⌉ of a source.
 * Pure. Keeps what it holds up to that share (a member that polled an entity before has it
 * in memory), takes every entity nobody ever held (no lease row: a new database or a new
 * site), takes vacant ones (given back, or held by a member that is not live) up to the
 * share, and gives back what it holds beyond the share. Nothing due is left unpolled for a
 * cycle because this member's share was full: members that start together do not know the
 * site list at the same moment, and the first to claim takes it all; the others get their
 * share from its next cycles.
 */
export function shareOf(
  keys: readonly string[],
  leases: ReadonlyArray<{ entity: string; holder: string; live: boolean }>,
  me: string,
  members: number,
): Share {
  const fair = Math.ceil(keys.length / Math.max(1, members));
  const byEntity = new Map(leases.map((l) => [l.entity, l]));
  const mine = keys.filter((k) => byEntity.get(k)?.holder === me);
  const unheld = keys.filter((k) => !byEntity.has(k));
  const vacant = keys.filter((k) => {
    const l = byEntity.get(k);
    return l !== undefined && l.holder !== me && !l.live;
  });
  const keep = mine.slice(0, fair);
  const room = Math.max(0, fair - keep.length - unheld.length);
  return { keep, unheld, vacant: vacant.slice(0, room), spare: vacant.slice(room), release: mine.slice(fair) };
}

/** A member's part of a source's entities at the start of a cycle (shareOf). */
export interface Share {
  /** Held by this member, up to its share: kept. */
  keep: string[];
  /** Held by nobody ever (no lease row): all taken, beyond the share too. */
  unheld: string[];
  /** Vacant (released, or their holder is not live), to take up to the share. */
  vacant: string[];
  /** The vacant ones after those, in order: taken instead of any another member took first. */
  spare: string[];
  /** Held beyond the share: polled this cycle, given back when it is done. */
  release: string[];
}

/**
 * Entity leases in the database: each due entity is polled by one live member. A member
 * claims at the start of each cycle of a source (shareOf), through conditional upserts that
 * take an entity only where nobody live holds it. What it gives back it still polls in that
 * cycle and releases when the cycle is done (cycleDone), so the member that takes it at its
 * next cycle polls it about when it is due, and no live member polls it twice in a cycle.
 * A member that died holds nothing once its lease ran out: the others take its entities at
 * their next cycle (takeover within the lease plus one interval). Entities that come back to
 * this member after another held them are forgotten in memory first (Poller.handedOver).
 */
export function clusterWorkClaims(store: Store, membership: Membership, onHandedOver: (source: string, entities: ReadonlyArray<number | null>) => void, log: Logger): WorkClaims {
  const repo = new ClusterRepo(store);
  /** What this member held after its last claim, per source (and under which member id). */
  const held = new Map<string, { member: string; keys: Set<string> }>();
  /** What this member gives back once the current cycle of a source is done. */
  const releasing = new Map<string, { member: string; keys: string[] }>();
  return {
    async claim(source, _dueAt, entities) {
      releasing.delete(source);
      if (!membership.live(membership.marginMs)) return [];
      const me = membership.id;
      const keys = entities.map(keyOf);
      const [leases, members] = await Promise.all([repo.entityLeases(source), repo.liveCount()]);
      const share = shareOf(keys, leases, me, members);
      const taken = await repo.takeEntities(source, [...share.unheld, ...share.vacant], me);
      // Members claiming at the same moment see the same vacant entities first: those another
      // one took are made up from the next ones, so together they take them all.
      const unheld = new Set(share.unheld);
      let short = share.vacant.length - taken.filter((k) => !unheld.has(k)).length;
      let spare = share.spare;
      while (short > 0 && spare.length > 0) {
        const next = spare.slice(0, short);
        spare = spare.slice(short);
        const more = await repo.takeEntities(source, next, me);
        taken.push(...more);
        short -= more.length;
      }
      if (share.release.length > 0) releasing.set(source, { member: me, keys: share.release });
      const mine = new Set([...share.keep, ...taken]);
      const before = held.get(source);
      const fresh = [...mine].filter((k) => before?.member !== me || !before.keys.has(k));
      held.set(source, { member: me, keys: mine });
      // Polled this cycle: what it keeps, what it took, and what it gives back when done.
      const polled = new Set([...mine, ...share.release]);
      const claimed = entities.filter((e) => polled.has(keyOf(e)));
      if (fresh.length > 0) onHandedOver(source, fresh.map((k) => (k === '' ? null : Number(k))));
      if (fresh.length > 0 || share.release.length > 0) {
        log.debug({ source, taken: fresh.length, releasing: share.release.length, polls: claimed.length, members }, 'entity leases claimed');
      }
      return claimed;
    },
    async cycleDone(source) {
      const r = releasing.get(source);
      releasing.delete(source);
      // Under the member id that claimed them (after a pause past the lease they are not ours).
      if (r && r.member === membership.id) await repo.releaseEntities(source, r.keys, r.member);
    },
    stillHeld(source) {
      // Claimed under this member id, whose lease still has the margin work must leave.
      return held.get(source)?.member === membership.id && membership.live(membership.marginMs);
    },
  };
}
