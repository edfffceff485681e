import { sql } from 'kysely';
import type { Database } from './schema.js';
import { inOrder, type DueDelivery } from './events-repo.js';
import { statement, type Executor } from './sql.js';

export type MemberRow = Database['cluster_members'];

/**
 * The database's clock in epoch milliseconds. Leases are judged on this one clock, so the
 * instances' own clocks may disagree without a member taking work that is still held.
 * (clock_timestamp, not now(): now() stands still for a whole transaction.)
 */
const NOW_MS = sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`;

/** The holder of an entity lease given back (no member id is empty). */
const VACANT = '';

/** A member counts as live while its lease lies ahead on the database's clock. */
const liveHolder = (column: string) =>
  sql`EXISTS (SELECT 1 FROM cluster_members m WHERE m.id = ${sql.ref(column)} AND m.lease_until > ${NOW_MS} AND m.left_at IS NULL)`;

type Me = { me: string };

const JOIN = statement<Omit<MemberRow, 'started_at' | 'heartbeat_at' | 'lease_until' | 'left_at' | 'ended'> & { lease_ms: number }>(
  (_qb, p) => sql`
    INSERT INTO cluster_members (id, instance, pid, host, started_at, heartbeat_at, lease_until, channels, config_hash)
    VALUES (${p.id}, ${p.instance}, ${p.pid}, ${p.host}, ${NOW_MS}, ${NOW_MS}, ${NOW_MS} + ${p.lease_ms}, ${p.channels}, ${p.config_hash})`,
);
// Only a member whose lease has not run out renews it: one that has (paused, cut off) must
// not come back to work the others have taken over; it joins again as a new member.
const RENEW = statement<Me & { lease_ms: number }, { lease_until: number }>(
  (_qb, p) => sql`
    UPDATE cluster_members SET heartbeat_at = ${NOW_MS}, lease_until = ${NOW_MS} + ${p.lease_ms}
    WHERE id = ${p.me} AND left_at IS NULL AND lease_until > ${NOW_MS}
    RETURNING lease_until`,
);
const LEAVE = statement<Me & { ended: 'stopped' | 'replaced' }>(
  (_qb, p) => sql`UPDATE cluster_members SET left_at = ${NOW_MS}, lease_until = LEAST(lease_until, ${NOW_MS}), ended = ${p.ended} WHERE id = ${p.me}`,
);
const RELEASE_OUTBOX = statement<Me>((_qb, p) => sql`UPDATE outbox SET claimed_by = NULL WHERE claimed_by = ${p.me}`);
// Given back, an entity keeps its row under no holder (VACANT): vacant is taken up to a
// member's share, where an entity with no row at all (never held) is taken by whoever
// claims it first (shareOf).
const RELEASE_ENTITIES = statement<Me>((_qb, p) => sql`UPDATE entity_leases SET holder = ${VACANT}, since = ${NOW_MS} WHERE holder = ${p.me}`);
const RELEASE_LEASES = statement<Me>((_qb, p) => sql`UPDATE cluster_leases SET holder = NULL WHERE holder = ${p.me}`);
const TAKE_LEASE = statement<Me & { name: string }>(
  (_qb, p) => sql`
    INSERT INTO cluster_leases (name, holder, token, since) VALUES (${p.name}, ${p.me}, 1, ${NOW_MS})
    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = cluster_leases.token + 1, since = EXCLUDED.since
    WHERE cluster_leases.holder IS NULL OR (cluster_leases.holder <> EXCLUDED.holder AND NOT ${liveHolder('cluster_leases.holder')})`,
);
const LEASE = statement<{ name: string }, { holder: string | null; token: number; since: number }>(
  (_qb, p) => sql`SELECT holder, token, since FROM cluster_leases WHERE name = ${p.name}`,
);
const MEMBERS = statement<{ since_ms: number }, MemberRow & { now: number; live: boolean }>(
  (_qb, p) => sql`
    SELECT m.*, ${NOW_MS} AS now, (m.lease_until > ${NOW_MS} AND m.left_at IS NULL) AS live FROM cluster_members m
    WHERE m.lease_until > ${NOW_MS} - ${p.since_ms} ORDER BY m.instance, m.started_at`,
);
const PRUNE_MEMBERS = statement<{ older_ms: number }>((_qb, p) => sql`DELETE FROM cluster_members WHERE lease_until < ${NOW_MS} - ${p.older_ms}`);
const LEASES = statement<Record<string, never>, { name: string; holder: string | null; token: number; since: number }>(
  () => sql`SELECT name, holder, token, since FROM cluster_leases ORDER BY name`,
);
const HELD = statement<Record<string, never>, { holder: string; kind: string; n: number }>(
  () => sql`
    SELECT holder, 'entities' AS kind, count(*)::int AS n FROM entity_leases WHERE holder <> ${VACANT} GROUP BY holder
    UNION ALL SELECT claimed_by AS holder, 'deliveries' AS kind, count(*)::int AS n FROM outbox WHERE claimed_by IS NOT NULL AND state = 'pending' GROUP BY claimed_by`,
);

const NAMESAKES = statement<{ instance: string; host: string }, { id: string; pid: number }>(
  (_qb, p) => sql`SELECT id, pid FROM cluster_members WHERE instance = ${p.instance} AND host = ${p.host} AND left_at IS NULL AND lease_until > ${NOW_MS}`,
);
const LIVE_COUNT = statement<Record<string, never>, { n: number }>(
  () => sql`SELECT count(*)::int AS n FROM cluster_members WHERE lease_until > ${NOW_MS} AND left_at IS NULL`,
);
const ENTITY_LEASES = statement<{ source: string }, { entity: string; holder: string; live: boolean }>(
  (_qb, p) => sql`SELECT entity, holder, ${liveHolder('entity_leases.holder')} AS live FROM entity_leases WHERE source = ${p.source}`,
);
// Taken only where nobody live holds the entity: members taking at once get each once.
const TAKE_ENTITIES = statement<Me & { source: string; entities: string[] }, { entity: string }>(
  (_qb, p) => sql`
    INSERT INTO entity_leases (source, entity, holder, since) SELECT ${p.source}, e, ${p.me}, ${NOW_MS} FROM unnest(${p.entities}::text[]) AS e
    ON CONFLICT (source, entity) DO UPDATE SET holder = EXCLUDED.holder, since = EXCLUDED.since
    WHERE entity_leases.holder <> EXCLUDED.holder AND NOT ${liveHolder('entity_leases.holder')}
    RETURNING entity`,
);
const RELEASE_SOME = statement<Me & { source: string; entities: string[] }>(
  (_qb, p) => sql`UPDATE entity_leases SET holder = ${VACANT}, since = ${NOW_MS} WHERE source = ${p.source} AND holder = ${p.me} AND entity = ANY(${p.entities}::text[])`,
);

type ClaimParams = Me & { now: number; limit: number; busy: number[]; channels: string[] | null };
/** An earlier row (inOrder's `earlier`) claimed by another member that is live. */
const heldByOther = (p: ClaimParams) => sql<boolean>`(earlier.claimed_by IS NOT NULL AND earlier.claimed_by <> ${p.me} AND ${liveHolder('earlier.claimed_by')})`;
// A row may be claimed when nobody holds it, its holder is not live, or it is this member's
// own (left over from a pass that did not send it) and not being sent now (`busy`). Every
// claim takes a new token. SKIP LOCKED: members claiming at once get different rows.
// Only rows of a channel this member has, or of one that no live member has (sent by none,
// so dead-lettered here): during a rolling config change, a channel only some members have
// yet is left to them. A member from before 0010 (channels null) counts as having every one;
// `channels` null: claim any channel.
const claimable = (p: ClaimParams) => sql`
  outbox.state = 'pending' AND outbox.next_attempt_at <= ${p.now} AND NOT (outbox.id = ANY(${p.busy}::bigint[]))
  AND (outbox.claimed_by IS NULL OR outbox.claimed_by = ${p.me} OR NOT ${liveHolder('outbox.claimed_by')})
  AND (${p.channels}::text[] IS NULL OR outbox.channel = ANY(${p.channels}::text[]) OR NOT EXISTS (SELECT 1 FROM cluster_members k
    WHERE k.lease_until > ${NOW_MS} AND k.left_at IS NULL AND (k.channels IS NULL OR k.channels::jsonb ? outbox.channel)))`;
const claim = (p: ClaimParams, where: ReturnType<typeof sql>, group = false) => sql`
  UPDATE outbox AS o SET claimed_by = ${p.me}, claim_token = o.claim_token + 1
  FROM (SELECT outbox.id FROM outbox WHERE ${claimable(p)} AND ${where} AND ${inOrder(p.now, group, heldByOther(p))} ORDER BY outbox.id LIMIT ${p.limit} FOR UPDATE SKIP LOCKED) AS c, events e
  WHERE o.id = c.id AND e.id = o.event_id
  RETURNING o.*, e.body`;
// Not the rows of channels whose every lane is taken (`full`): they would wait, claimed.
const CLAIM = statement<ClaimParams & { full: string[] }, DueDelivery>((_qb, p) => claim(p, sql`NOT (outbox.channel = ANY(${p.full}::text[]))`));
const CLAIM_GROUP = statement<ClaimParams & { channel: string; group_key: string }, DueDelivery>((_qb, p) =>
  claim(p, sql`outbox.channel = ${p.channel} AND outbox.group_key = ${p.group_key}`, true),
);

/** What a member holds, for `cluster status`. */
export interface Holdings {
  holder: string;
  kind: 'entities' | 'deliveries';
  n: number;
}

/**
 * The cluster's tables (migration 0006): members and their heartbeats, named leases (the
 * timers), and the claims on outbox rows. PostgreSQL only (the statements read the
 * database's clock); a SQLite file has one daemon and no cluster.
 */
export class ClusterRepo {
  constructor(private readonly x: Executor) {}

  /** Add a member, live for `leaseMs` from now, with the channels and the fingerprint of its config. */
  async join(m: { id: string; instance: string; pid: number; host: string; channels?: readonly string[]; configHash?: string }, leaseMs: number): Promise<void> {
    const { channels, configHash, ...rest } = m;
    await this.x.run(JOIN, { ...rest, channels: channels === undefined ? null : JSON.stringify(channels), config_hash: configHash ?? null, lease_ms: leaseMs });
  }

  /** Renew a member's lease; false when it had run out or the member left (it must join again). */
  async renew(me: string, leaseMs: number): Promise<boolean> {
    return (await this.x.get(RENEW, { me, lease_ms: leaseMs })) !== undefined;
  }

  /**
   * The member is no longer live, and what it held is free for the others at once: at a clean
   * stop, or (`replaced`) when the next run of its instance found its process gone.
   */
  async leave(me: string, ended: 'stopped' | 'replaced' = 'stopped'): Promise<void> {
    await this.x.run(LEAVE, { me, ended });
    await this.x.run(RELEASE_OUTBOX, { me });
    await this.x.run(RELEASE_ENTITIES, { me });
    await this.x.run(RELEASE_LEASES, { me });
  }

  /**
   * Take the named lease when it is free or its holder is not live, or keep it; resolves
   * with its holder and token after the attempt.
   */
  async takeLease(name: string, me: string): Promise<{ holder: string | null; token: number }> {
    await this.x.run(TAKE_LEASE, { name, me });
    const r = await this.x.get(LEASE, { name });
    return { holder: r?.holder ?? null, token: r?.token ?? 0 };
  }

  /**
   * Claim due outbox rows for `me` (oldest first), with a new claim token each; rows in
   * `busy` (being sent by this member) are left alone.
   */
  async claimDue(me: string, now: number, limit: number, busy: readonly number[], full: readonly string[] = [], channels: readonly string[] | null = null): Promise<DueDelivery[]> {
    return byId(await this.x.all(CLAIM, { me, now, limit, busy: [...busy], full: [...full], channels: channels && [...channels] }));
  }

  /** Claim the due rows of one group (one message carries them), as claimDue. */
  async claimGroup(me: string, channel: string, groupKey: string, now: number, limit: number, busy: readonly number[], channels: readonly string[] | null = null): Promise<DueDelivery[]> {
    return byId(await this.x.all(CLAIM_GROUP, { me, channel, group_key: groupKey, now, limit, busy: [...busy], channels: channels && [...channels] }));
  }

  /** Live members of this instance name on this host (an earlier run of it, or a twin). */
  namesakes(instance: string, host: string): Promise<Array<{ id: string; pid: number }>> {
    return this.x.all(NAMESAKES, { instance, host });
  }

  /** How many members are live now. */
  async liveCount(): Promise<number> {
    return (await this.x.get(LIVE_COUNT, {}))?.n ?? 0;
  }

  /** The entity leases of a source: who holds each, and whether the holder is live. */
  entityLeases(source: string): Promise<Array<{ entity: string; holder: string; live: boolean }>> {
    return this.x.all(ENTITY_LEASES, { source });
  }

  /** Take these entities where nobody live holds them; resolves with those taken. */
  async takeEntities(source: string, entities: readonly string[], me: string): Promise<string[]> {
    if (entities.length === 0) return [];
    return (await this.x.all(TAKE_ENTITIES, { source, entities: [...entities], me })).map((r) => r.entity);
  }

  /** Give up these entities (another member takes them at its next cycle). */
  async releaseEntities(source: string, entities: readonly string[], me: string): Promise<void> {
    if (entities.length > 0) await this.x.run(RELEASE_SOME, { source, entities: [...entities], me });
  }

  /** Members whose lease ended less than `sinceMs` ago or not yet, with the database's time. */
  members(sinceMs: number): Promise<Array<MemberRow & { now: number; live: boolean }>> {
    return this.x.all(MEMBERS, { since_ms: sinceMs });
  }

  /** Every named lease and its holder. */
  leases(): Promise<Array<{ name: string; holder: string | null; token: number; since: number }>> {
    return this.x.all(LEASES, {});
  }

  /** How many entities and pending deliveries each holder holds. */
  holdings(): Promise<Holdings[]> {
    return this.x.all(HELD, {}) as Promise<Holdings[]>;
  }

  /** Forget members whose lease ended more than `olderMs` ago (what they held is free anyway). */
  pruneMembers(olderMs: number): Promise<number> {
    return this.x.run(PRUNE_MEMBERS, { older_ms: olderMs });
  }
}

function byId(rows: DueDelivery[]): DueDelivery[] {
  return rows.sort((a, b) => a.id - b.id);
}
