import type { DeliveryClaims } from '../notify/outbox-worker.js';
import { ClusterRepo } from '../store/cluster-repo.js';
import type { Store } from '../store/db.js';
import type { Membership } from './membership.js';

/**
 * The outbox rows of a cluster member: claimed in the database (FOR UPDATE SKIP LOCKED, so
 * members claiming at once get different rows), each under a new claim token. A claim
 * holds while its member is live; the rows of a member whose lease ran out are claimable by
 * the others. A row is sent only while this member surely holds its lease (with a margin),
 * and its attempt is recorded only under the token it was claimed with (EventsRepo
 * .recordAttempt): a member that wakes up after its lease ran out neither sends what it had
 * claimed nor records over the member that took it. `channels`: the channels of this member's
 * config; it claims only their rows, and those of a channel no live member has (null: any).
 */
export function clusterClaims(store: Store, membership: Membership, channels: readonly string[] | null = null): DeliveryClaims {
  const repo = new ClusterRepo(store);
  // Not live (yet, or any more): claim nothing; what this member holds goes to the others.
  const mine = (): string | null => (membership.live(membership.marginMs) ? membership.id : null);
  return {
    // Claimed FOR UPDATE, which allows no window to count rows per channel: a full channel's
    // rows are left out instead, so they are not claimed to wait.
    async due(now, limit, _perChannel, busy, full) {
      const me = mine();
      return me === null ? [] : repo.claimDue(me, now, limit, busy, full, channels);
    },
    async group(channel, groupKey, now, limit, busy) {
      const me = mine();
      return me === null ? [] : repo.claimGroup(me, channel, groupKey, now, limit, busy, channels);
    },
    maySend(rows) {
      const me = mine();
      return me !== null && rows.every((r) => r.claimed_by === me);
    },
  };
}
