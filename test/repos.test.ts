import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../src/store/db.js';
import { toEventRow, type OutboxInsert } from '../src/store/events-repo.js';
import { ClusterRepo } from '../src/store/cluster-repo.js';
import { repos, type Repos } from '../src/store/repos.js';
import type { SnapshotRow } from '../src/store/snapshots-repo.js';
import { siteEvent } from './events-fixture.js';
import { ENGINES, freshStorage } from './pg.js';
import { statement } from '../src/store/sql.js';

/**
 * Every repository, on both engines: the same calls give the same answers on SQLite and on
 * PostgreSQL. Each engine gets its own fresh database; each test writes its own keys.
 */
/** How many delivery attempts an outbox row has. */
const ATTEMPTS = statement<{ id: number }, { n: number | string }>((qb, p) =>
  qb.selectFrom('delivery_attempts').select((eb) => eb.fn.countAll<number>().as('n')).where('outbox_id', '=', p.id),
);

describe.each(ENGINES)('repositories on %s', (engine) => {
  let store: Store;
  let r: Repos;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const fresh = await freshStorage(engine);
    cleanup = fresh.cleanup;
    store = await openStore(fresh.storage, { now: () => 1_000 });
    r = repos(store);
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  /** Run `fn` with the repositories of one transaction. */
  const tx = <T>(fn: (t: Repos) => Promise<T>): Promise<T> => store.transaction((x) => fn(repos(x)));
  const snapshot = (entity: string, version: number, site: number | null = 1): SnapshotRow => ({
    source: 'health',
    entity,
    site_id: site,
    hash: `h${version}`,
    body: JSON.stringify({ v: version }),
    version,
    changed_at: 1_700_000_000_000 + version,
  });
  const outboxRow = (eventId: string, channel: string, over: Partial<OutboxInsert> = {}): OutboxInsert => ({
    event_id: eventId,
    channel,
    state: 'pending',
    attempts: 0,
    next_attempt_at: 100,
    last_error: null,
    created_at: 50,
    updated_at: 50,
    ...over,
  });

  describe('snapshots and poll state', () => {
    it('stores, replaces and reads snapshots by source and entity, with BIGINT times as numbers', async () => {
      await tx((t) => t.snapshots.put(snapshot('sites/1/health', 1)));
      await tx((t) => t.snapshots.put(snapshot('sites/1/health', 2)));
      expect(await r.snapshots.head('health', 'sites/1/health')).toEqual({ hash: 'h2', version: 2 });
      expect(await r.snapshots.get('health', 'sites/1/health')).toEqual(snapshot('sites/1/health', 2));
      expect(await r.snapshots.get('health', 'sites/9/health')).toBeUndefined();
    });

    it('keeps poll state, lists failing entities and counts them per source', async () => {
      const state = (source: string, entity: string, failures: number, site: number | null = 2) => ({
        source,
        entity,
        site_id: site,
        last_attempt_at: 10,
        last_success_at: failures ? null : 10,
        consecutive_failures: failures,
        last_error_code: failures ? 'timeout' : null,
        last_error: failures ? 'timed out' : null,
        failing_since: failures ? 5 : null,
      });
      await tx(async (t) => {
        await t.snapshots.putState(state('usage', 'sites/2/usage', 3));
        await t.snapshots.putState(state('usage', 'sites/3/usage', 1, 3));
        await t.snapshots.putState(state('usage', '', 0, null));
        await t.snapshots.putState(state('dns', 'sites/2/dns', 0));
      });
      expect(await r.snapshots.state('usage', 'sites/2/usage')).toEqual(state('usage', 'sites/2/usage', 3));
      expect((await r.snapshots.failing('usage', 2)).map((s) => s.entity)).toEqual(['sites/2/usage']);
      expect((await r.snapshots.failing('usage', 1)).map((s) => s.entity)).toEqual(['sites/2/usage', 'sites/3/usage']);
      expect((await r.snapshots.allFailing()).map((s) => s.entity).sort()).toEqual(['sites/2/usage', 'sites/3/usage']);
      expect(await r.snapshots.failingCounts()).toEqual([{ source: 'usage', failing: 2 }]);
      expect((await r.snapshots.sourceStates()).map((s) => s.source)).toEqual(['usage']);
    });

    it('forgets everything stored about a site, and nothing about the others', async () => {
      await tx(async (t) => {
        await t.snapshots.put(snapshot('sites/7/health', 1, 7));
        await t.snapshots.put(snapshot('sites/8/health', 1, 8));
      });
      await tx((t) => t.snapshots.forgetSite(7));
      expect(await r.snapshots.head('health', 'sites/7/health')).toBeUndefined();
      expect(await r.snapshots.head('health', 'sites/8/health')).toEqual({ hash: 'h1', version: 1 });
    });

    it('lists the entities of a source that have a snapshot, by name, without their bodies', async () => {
      await tx(async (t) => {
        await t.snapshots.put({ ...snapshot('sites/12/backups', 1, 12), source: 'backups' });
        await t.snapshots.put({ ...snapshot('sites/11/backups', 1, 11), source: 'backups' });
        await t.snapshots.put({ ...snapshot('sites/11/usage', 1, 11), source: 'usage' });
      });
      expect(await r.snapshots.entitiesOf('backups')).toEqual([
        { entity: 'sites/11/backups', site_id: 11 },
        { entity: 'sites/12/backups', site_id: 12 },
      ]);
      expect(await r.snapshots.entitiesOf('nothing')).toEqual([]);
    });
  });

  describe('alerts', () => {
    const alert = (rule: string, subject: string, status: 'firing' | 'resolved', since: number) => ({
      rule,
      subject,
      site_id: 4,
      status,
      seq: 1,
      since,
      last_event_id: null,
      pending_since: null,
      clear_since: null,
      last_sent_at: since,
      repeats: 0,
    });

    it('upserts alert state and lists firing alerts, oldest first, for a site and overall', async () => {
      await tx(async (t) => {
        await t.alerts.put(alert('site-offline', 'sites/4/health', 'firing', 20));
        await t.alerts.put(alert('site-slow', 'sites/4/health', 'resolved', 10));
        await t.alerts.put(alert('disk-high', 'sites/4/usage', 'firing', 5));
      });
      await tx((t) => t.alerts.put({ ...alert('site-slow', 'sites/4/health', 'firing', 30), seq: 2 }));
      expect((await r.alerts.get('site-slow', 'sites/4/health'))?.seq).toBe(2);
      expect((await r.alerts.firingForSite(4)).map((a) => a.rule).sort()).toEqual(['disk-high', 'site-offline', 'site-slow']);
      const firing = (await r.alerts.firing()).filter((a) => a.site_id === 4);
      expect(firing.map((a) => a.since)).toEqual([5, 20, 30]);
    });

    it('reads the alerts of some rules about an entity and its records, and no other entity', async () => {
      await tx(async (t) => {
        await t.alerts.put(alert('cron-failed', 'sites/5/cron', 'firing', 1));
        await t.alerts.put(alert('cron-failed', 'sites/5/cron/17', 'firing', 1));
        await t.alerts.put(alert('cron-paused', 'sites/5/cron/18', 'resolved', 1));
        // Not about sites/5/cron: longer entity names (one sorts inside the key range the
        // query reads: '-' comes before '/'), another site, another rule.
        await t.alerts.put(alert('cron-failed', 'sites/5/cronjobs/1', 'firing', 1));
        await t.alerts.put(alert('cron-failed', 'sites/5/cron-old', 'firing', 1));
        await t.alerts.put(alert('cron-paused', 'sites/5/cron-old/3', 'firing', 1));
        await t.alerts.put(alert('cron-failed', 'sites/50/cron/1', 'firing', 1));
        await t.alerts.put(alert('site-offline', 'sites/5/cron/17', 'firing', 1));
      });
      const got = await r.alerts.ofEntity(['cron-failed', 'cron-paused'], 'sites/5/cron');
      expect(got.map((a) => `${a.rule} ${a.subject}`).sort()).toEqual(['cron-failed sites/5/cron', 'cron-failed sites/5/cron/17', 'cron-paused sites/5/cron/18']);
      expect(await r.alerts.ofEntity([], 'sites/5/cron')).toEqual([]);
    });

    it('lists every row of one rule by subject, and its firing rows only', async () => {
      await tx(async (t) => {
        await t.alerts.put(alert('wide-rule', 'sites/4/b', 'firing', 1));
        await t.alerts.put(alert('wide-rule', 'sites/4/a', 'resolved', 1));
        await t.alerts.put(alert('wide-rule', 'sites/5/a', 'firing', 1));
        await t.alerts.put(alert('narrow-rule', 'sites/4/a', 'firing', 1));
      });
      expect((await r.alerts.ofRule('wide-rule')).map((a) => a.subject)).toEqual(['sites/4/a', 'sites/4/b', 'sites/5/a']);
      expect((await r.alerts.firingOfRule('wide-rule')).map((a) => a.subject).sort()).toEqual(['sites/4/b', 'sites/5/a']);
      expect(await r.alerts.ofRule('no-such-rule')).toEqual([]);
    });

    it('joins each firing alert with the event of its last firing', async () => {
      const e = siteEvent('join', 6, { name: 'site.offline', status: 'firing', rule: 'site-offline', subject: 'sites/6/health' });
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        await t.alerts.put({ ...alert('site-offline', 'sites/6/health', 'firing', 1), site_id: 6, last_event_id: e.id });
      });
      const mine = (await r.alerts.firingWithEvents()).find((a) => a.subject === 'sites/6/health');
      expect(mine).toMatchObject({ rule: 'site-offline', site_id: 6, seq: 1 });
      expect(JSON.parse(mine!.body!)).toEqual(e);
    });
  });

  describe('events and the outbox', () => {
    it('appends events once (a second insert of the same id is ignored) and pages them by cursor and filter', async () => {
      const a = siteEvent('log-a', 11, { name: 'site.offline', at: Date.parse('2026-11-21T10:00:00Z') });
      const b = siteEvent('log-b', 12, { name: 'backup.failed', at: Date.parse('2026-11-21T11:00:00Z') });
      const c = siteEvent('log-c', 11, { name: 'backup.failed', at: Date.parse('2026-11-21T12:00:00Z') });
      const before = await r.events.lastSeq();
      const inserted = await tx(async (t) => [await t.events.addEvent(toEventRow(a)), await t.events.addEvent(toEventRow(b)), await t.events.addEvent(toEventRow(a))]);
      expect(inserted).toEqual([true, true, false]);
      await tx((t) => t.events.addEvent(toEventRow(c)));
      const all = await r.events.list(before, { type: null, siteId: null, since: null }, 10);
      expect(all.map((x) => JSON.parse(x.body).id)).toEqual([a.id, b.id, c.id]);
      expect(all.map((x) => x.seq)).toEqual([...all.map((x) => x.seq)].sort((m, n) => m - n));
      expect(await r.events.lastSeq()).toBe(all.at(-1)!.seq);
      const page2 = await r.events.list(all[0]!.seq, { type: null, siteId: null, since: null }, 1);
      expect(page2.map((x) => JSON.parse(x.body).id)).toEqual([b.id]);
      const site11 = await r.events.list(before, { type: null, siteId: 11, since: null }, 10);
      expect(site11.map((x) => JSON.parse(x.body).id)).toEqual([a.id, c.id]);
      const backups = await r.events.latest({ type: 'hostwatch.backup.failed', siteId: null, since: Date.parse('2026-11-21T10:30:00Z') }, 10);
      expect(backups.map((x) => JSON.parse(x.body).id)).toEqual([c.id, b.id]);
    });

    it('hands out at most the given number of due rows per channel, so a backlog of one channel leaves room for the others', async () => {
      const events = Array.from({ length: 6 }, (_, i) => siteEvent(`lane-${i}`, 40 + i));
      await tx(async (t) => {
        for (const e of events) {
          await t.events.addEvent(toEventRow(e));
          await t.events.enqueue(outboxRow(e.id, 'backlog'));
        }
        await t.events.enqueue(outboxRow(events[5]!.id, 'other'));
      });
      const mine = (rows: Array<{ event_id: string; channel: string }>): string[] =>
        rows.flatMap((d) => {
          const i = events.findIndex((e) => e.id === d.event_id);
          return i < 0 ? [] : [`${d.channel}:${i}`];
        });
      // Oldest first, two of the backlog's and the other channel's one; without a cap, the first three rows are all the backlog's.
      expect(mine(await r.events.due(200, 3, 2))).toEqual(['backlog:0', 'backlog:1', 'other:5']);
      expect(mine(await r.events.due(200, 3))).toEqual(['backlog:0', 'backlog:1', 'backlog:2']);
    });

    it('hands out the rows of one channel and order key in the order they were queued: none while an earlier one waits', async () => {
      const at = { name: 'site.offline', rule: 'site-offline', subject: 'sites/70/health' } as const;
      const [firing, resolved, other] = [siteEvent('ord-f', 70, { ...at, status: 'firing' }), siteEvent('ord-r', 70, { ...at, status: 'resolved' }), siteEvent('ord-o', 71)];
      const key = (e: typeof firing) => `${e.data.rule}\u001f${e.subject}`;
      const ids = await tx(async (t) => {
        for (const e of [firing, resolved, other]) await t.events.addEvent(toEventRow(e));
        // The firing waits for its retry (due at 900); its resolution and another event are due now.
        await t.events.enqueue(outboxRow(firing.id, 'ordered', { next_attempt_at: 900, group_key: 'g', order_key: key(firing) }));
        await t.events.enqueue(outboxRow(resolved.id, 'ordered', { group_key: 'g', order_key: key(resolved) }));
        await t.events.enqueue(outboxRow(other.id, 'ordered', { group_key: 'g', order_key: key(other) }));
        return (await t.events.outboxFor(firing.id))[0]!.id;
      });
      const mine = (rows: Array<{ event_id: string }>): string[] => rows.map((d) => [firing, resolved, other].findIndex((e) => e.id === d.event_id)).filter((i) => i >= 0).map((i) => ['firing', 'resolved', 'other'][i]!);
      expect(mine(await r.events.due(200, 50))).toEqual(['other']);
      // `deliveries` says the resolution waits for the firing, whose row it names; the others wait for nothing.
      const listed = await r.events.deliveries({ failed: false, pending: true, channel: 'ordered' }, 10);
      expect(listed.map((d) => [mine([d])[0], d.waits_behind])).toEqual([['other', null], ['resolved', ids], ['firing', null]]);
      expect(mine(await r.delivery.groupRows('ordered', 'g', 200, 50))).toEqual(['other']);
      if (engine === 'postgres') expect(mine(await new ClusterRepo(store).claimDue('m1', 200, 50, []))).toEqual(['other']);
      // Once the firing is due too, a group's message carries both, the firing first.
      expect(mine(await r.delivery.groupRows('ordered', 'g', 1_000, 50))).toEqual(['firing', 'resolved', 'other']);
      expect(mine(await r.events.due(1_000, 50))).toEqual(['firing', 'other']);
      // Delivered (or dead): the resolution goes.
      await tx((t) =>
        t.events.recordAttempt(
          { id: ids, claim_token: 0, state: 'delivered', attempts: 1, next_attempt_at: 900, last_error: null, updated_at: 1_000 },
          { outbox_id: ids, attempt: 1, at: 1_000, outcome: 'delivered', status_code: 200, error: null, duration_ms: 1 },
        ),
      );
      expect(mine(await r.events.due(200, 50))).toEqual(['resolved', 'other']);
    });

    it('refuses an event insert outside a transaction (it could commit out of seq order)', async () => {
      await expect(r.events.addEvent(toEventRow(siteEvent('outside', 1)))).rejects.toThrow('events are stored inside a transaction');
    });

    it('queues each event once per channel, hands out due rows oldest first, and records attempts', async () => {
      const e = siteEvent('box', 13);
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        await t.events.enqueue(outboxRow(e.id, 'hooks'));
        await t.events.enqueue(outboxRow(e.id, 'ops', { next_attempt_at: 10_000_000_000_000 }));
        await t.events.enqueue(outboxRow(e.id, 'hooks'));
      });
      expect((await r.events.outboxFor(e.id)).map((o) => o.channel)).toEqual(['hooks', 'ops']);
      const due = (await r.events.due(200, 100)).filter((d) => d.event_id === e.id);
      expect(due.map((d) => d.channel)).toEqual(['hooks']);
      expect(JSON.parse(due[0]!.body)).toEqual(e);
      expect(due[0]!.group_key).toBeNull();
      const attempt = { outbox_id: due[0]!.id, attempt: 1, at: 200, outcome: 'retry', status_code: 503, error: 'HTTP 503', duration_ms: 12 } as const;
      const update = { id: due[0]!.id, state: 'pending', attempts: 1, next_attempt_at: 5_000, last_error: 'HTTP 503', updated_at: 200 } as const;
      // Under another claim token (a cluster member that lost its claim): nothing is written.
      expect(await tx((t) => t.events.recordAttempt({ ...update, state: 'delivered', claim_token: due[0]!.claim_token + 1 }, attempt))).toBe(false);
      expect((await r.events.outboxFor(e.id)).find((o) => o.channel === 'hooks')).toMatchObject({ state: 'pending', attempts: 0 });
      expect(await tx((t) => t.events.recordAttempt({ ...update, claim_token: due[0]!.claim_token }, attempt))).toBe(true);
      const view = (await r.events.deliveries({ failed: true, channel: 'hooks' }, 10)).find((d) => d.event_id === e.id);
      expect(view).toMatchObject({ channel: 'hooks', state: 'pending', attempts: 1, last_error: 'HTTP 503', last_status: 503, type: e.type, subject: e.subject });
      expect(await r.events.count('pending')).toBeGreaterThanOrEqual(2);
      // Counted as deliveries(failed) keeps them (a number on both engines): the retrying row, not the untried one.
      const failed = await r.events.failedCount('hooks');
      expect(typeof failed).toBe('number');
      expect(await r.events.failedCount(null)).toBeGreaterThanOrEqual(failed);
      expect(await r.events.nextDue()).toBeLessThanOrEqual(5_000);
      expect(await r.events.oldestPendingCreatedAt()).toBe(50);
      expect(await tx((t) => t.events.redeliver({ eventId: e.id }, 'hooks', 300))).toBe(1);
      expect((await r.events.outboxFor(e.id)).find((o) => o.channel === 'hooks')).toMatchObject({ state: 'pending', attempts: 0, next_attempt_at: 300 });
      expect(await r.events.failedCount('hooks')).toBe(failed - 1);
    });

    it('takes back the never-tried rows of an event for some channels, and no row already tried', async () => {
      const e = siteEvent('retract', 14);
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        await t.events.enqueue(outboxRow(e.id, 'slack'));
        await t.events.enqueue(outboxRow(e.id, 'mail', { attempts: 1, last_error: 'HTTP 503' }));
        await t.events.enqueue(outboxRow(e.id, 'hooks'));
      });
      expect(await tx((t) => t.delivery.retract(e.id, ['slack', 'mail']))).toBe(1);
      expect((await r.events.outboxFor(e.id)).map((o) => o.channel)).toEqual(['hooks', 'mail']);
      expect(await tx((t) => t.delivery.retract(e.id, []))).toBe(0);
    });

    it('requeues every dead row of a channel with redeliver --dead, and only those', async () => {
      const e = siteEvent('dead', 14);
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        await t.events.enqueue(outboxRow(e.id, 'deadch', { state: 'dead', attempts: 9 }));
        await t.events.enqueue(outboxRow(e.id, 'livech', { state: 'dead', attempts: 9 }));
      });
      expect(await tx((t) => t.events.redeliver({ dead: true }, 'deadch', 400))).toBe(1);
      const rows = await r.events.outboxFor(e.id);
      expect(rows.map((o) => `${o.channel}:${o.state}`)).toEqual(['deadch:pending', 'livech:dead']);
    });
  });

  describe('the change log and evidence', () => {
    it('appends versions, reads the one in force at a time, the last version, and pages through history', async () => {
      await tx(async (t) => {
        for (let v = 1; v <= 5; v++) await t.history.add({ source: 'usage', entity: 'sites/3/usage', site_id: 3, version: v, at: v * 100, body: `{"v":${v}}` });
        await t.history.add({ source: 'dns', entity: 'sites/3/dns', site_id: 3, version: 1, at: 250, body: '{}' });
      });
      expect((await r.history.at('usage', 'sites/3/usage', 350))?.version).toBe(3);
      expect(await r.history.at('usage', 'sites/3/usage', 50)).toBeUndefined();
      expect(await r.history.lastVersion('usage', 'sites/3/usage')).toBe(5);
      expect(await r.history.lastVersion('usage', 'sites/nope/usage')).toBeNull();
      expect((await r.history.ofEntity('usage', 'sites/3/usage')).map((x) => x.version)).toEqual([1, 2, 3, 4, 5]);
      // Since 300: versions 3–5, plus the last one before it (2), and dns's one (250) as its start.
      const since: string[] = [];
      for await (const row of r.history.since(300, ['usage', 'dns'])) since.push(`${row.source}@${row.at}`);
      expect(since).toEqual(['usage@200', 'dns@250', 'usage@300', 'usage@400', 'usage@500']);
      const onlyUsage: number[] = [];
      for await (const row of r.history.since(450, ['usage'])) onlyUsage.push(row.version);
      expect(onlyUsage).toEqual([4, 5]);
    });

    it('stores evidence once per event and prunes old history, keeping each entity newest version', async () => {
      const e = siteEvent('ev', 15);
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        await t.history.putEvidence({ event_id: e.id, at: 10, body: '{"a":1}' });
        await t.history.putEvidence({ event_id: e.id, at: 11, body: '{"a":2}' });
        await t.history.add({ source: 'backups', entity: 'sites/15/backups', site_id: 15, version: 1, at: 10, body: '[]' });
        await t.history.add({ source: 'backups', entity: 'sites/15/backups', site_id: 15, version: 2, at: 20, body: '[]' });
      });
      expect(await r.history.evidence(e.id)).toEqual({ event_id: e.id, at: 10, body: '{"a":1}' });
      expect(await r.history.event(e.id)).toMatchObject({ id: e.id, silenced_by: null, held_by: null, held_outcome: null });
      expect((await r.history.lastEventOf(e.data.rule, e.subject))?.id).toBe(e.id);
      const pruned = await tx((t) => t.history.prune(15));
      expect(pruned.evidence).toBeGreaterThanOrEqual(1);
      expect(await r.history.evidence(e.id)).toBeUndefined();
      expect((await r.history.ofEntity('backups', 'sites/15/backups')).map((x) => x.version)).toEqual([2]);
    });

    it('forgets deliveries that succeeded before the retention, with their attempts, and keeps pending and dead rows of any age and the events', async () => {
      const e = siteEvent('ev-prune', 17);
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        for (const channel of ['pa', 'pb', 'pc']) await t.events.enqueue(outboxRow(e.id, channel));
        await t.events.enqueue(outboxRow(e.id, 'pd', { next_attempt_at: 10_000_000_000_000 }));
      });
      const due = (await r.events.due(200, 100)).filter((d) => d.event_id === e.id);
      // pa delivered at 10, pb delivered at 30, pc dead at 10; pd still pending.
      for (const [channel, state, at] of [['pa', 'delivered', 10], ['pb', 'delivered', 30], ['pc', 'dead', 10]] as const) {
        const row = due.find((d) => d.channel === channel)!;
        const outcome = state === 'delivered' ? 'delivered' : 'dead';
        const written = await tx((t) =>
          t.events.recordAttempt(
            { id: row.id, state, attempts: 1, next_attempt_at: at, last_error: null, updated_at: at, claim_token: row.claim_token },
            { outbox_id: row.id, attempt: 1, at, outcome, status_code: 200, error: null, duration_ms: 1 },
          ),
        );
        expect(written).toBe(true);
      }
      const attemptsOf = async (channel: string): Promise<number> => {
        const id = due.find((d) => d.channel === channel)!.id;
        return Number((await store.get(ATTEMPTS, { id }))!.n);
      };
      expect(await attemptsOf('pa')).toBe(1);
      expect(await tx((t) => t.delivery.pruneDelivered(20))).toBe(1);
      expect((await r.events.outboxFor(e.id)).map((o) => o.channel)).toEqual(['pb', 'pc', 'pd']);
      expect([await attemptsOf('pa'), await attemptsOf('pb'), await attemptsOf('pc')]).toEqual([0, 1, 1]);
      expect((await r.history.event(e.id))?.id).toBe(e.id);
    });
  });

  describe('silences', () => {
    const silence = (id: string, starts: number, ends: number) => ({
      id,
      match: 'site_id == 16',
      starts_at: starts,
      ends_at: ends,
      comment: 'work',
      created_by: 'test',
      created_at: starts,
      expired_at: null,
    });

    it('stores silences, lists the active ones and recent ones, expires once, and counts what they held back', async () => {
      await tx(async (t) => {
        await t.silences.add(silence('s-active', 100, 1_000));
        await t.silences.add(silence('s-later', 500, 2_000));
        await t.silences.add(silence('s-old', 10, 50));
      });
      expect((await r.silences.active(200)).map((s) => s.id)).toContain('s-active');
      expect((await r.silences.active(200)).map((s) => s.id)).not.toContain('s-later');
      expect((await r.silences.recent(200, 40, 10)).map((s) => s.id)).toEqual(expect.arrayContaining(['s-active', 's-later', 's-old']));
      expect(await tx((t) => t.silences.expire('s-active', 300))).toBe(true);
      expect(await tx((t) => t.silences.expire('s-active', 301))).toBe(false);
      expect((await r.silences.get('s-active'))?.expired_at).toBe(300);
      const e = siteEvent('silenced', 16);
      await tx(async (t) => {
        await t.events.addEvent(toEventRow(e));
        await t.silences.markSilenced(e.id, 's-later');
      });
      expect(await r.silences.suppressed('s-later')).toBe(1);
      expect(await r.silences.silencedBy(e.id)).toBe('s-later');
      expect(await r.silences.silencedBy('no-such-event')).toBeUndefined();
      expect(await r.silences.recentlySilenced(5)).toContainEqual({ event_id: e.id, silence_id: 's-later' });
    });
  });

  describe('daemon heartbeat', () => {
    it('keeps one row per instance, replaced by each beat, marks a clean stop, and reads the latest', async () => {
      const beat = (instance: string, seen: number) => ({ instance, pid: 4711, host: 'web1', started_at: 1_700_000_000_000, seen_at: seen, stopped_at: null });
      expect(await r.daemon.latest()).toBeUndefined();
      await tx((t) => t.daemon.beat(beat('a', 1_700_000_000_100)));
      await tx((t) => t.daemon.beat(beat('b', 1_700_000_000_050)));
      await tx((t) => t.daemon.beat(beat('a', 1_700_000_005_100)));
      expect(await r.daemon.latest()).toEqual(beat('a', 1_700_000_005_100));
      await tx((t) => t.daemon.stopped('a', 1_700_000_006_000));
      expect(await r.daemon.latest()).toEqual({ ...beat('a', 1_700_000_006_000), stopped_at: 1_700_000_006_000 });
    });
  });

  describe('delivery: groups, channel health, inhibitions, held events', () => {
    it('tells when a group is due and when it last went out, and returns its due rows', async () => {
      const e1 = siteEvent('g1', 17);
      const e2 = siteEvent('g2', 17);
      await tx(async (t) => {
        for (const [e, due] of [[e1, 70], [e2, 90]] as const) {
          await t.events.addEvent(toEventRow(e));
          await t.events.enqueue(outboxRow(e.id, 'mail', { group_key: 'site:17', next_attempt_at: due }));
        }
      });
      expect(await r.delivery.group('mail', 'site:17')).toEqual({ pendingDue: 70, lastSent: null });
      await tx((t) => t.delivery.groupSent('mail', 'site:17', 60));
      expect(await r.delivery.group('mail', 'site:17')).toEqual({ pendingDue: 70, lastSent: 60 });
      expect((await r.delivery.groupRows('mail', 'site:17', 80, 10)).map((d) => d.event_id)).toEqual([e1.id]);
      expect(await tx((t) => t.delivery.flushGroups(20, 'digest'))).toBeGreaterThanOrEqual(2);
      expect((await r.delivery.groupRows('mail', 'site:17', 20, 10)).map((d) => d.event_id)).toEqual([e1.id, e2.id]);
    });

    it('keeps channel health, and lists disabled channels', async () => {
      const row = { channel: 'slackish', failing_since: 5, disabled_at: 9, disabled_reason: 'gone', disabled_count: 1 };
      await tx((t) => t.delivery.putChannelState(row));
      expect(await r.delivery.channelState('slackish')).toEqual(row);
      expect(await r.delivery.disabledChannels()).toContainEqual(row);
      await tx((t) => t.delivery.putChannelState({ ...row, disabled_at: null, disabled_reason: null }));
      expect(await r.delivery.disabledChannels()).not.toContainEqual(expect.objectContaining({ channel: 'slackish' }));
    });

    it('starts and ends inhibitions, holds events and records what became of them', async () => {
      const held = siteEvent('held', 18, { status: 'firing' });
      const other = siteEvent('maint', 18);
      await tx(async (t) => {
        await t.delivery.startInhibition({ source: 'site.offline', site_id: 18, event_id: 'x', since: 1 });
        await t.delivery.startInhibition({ source: 'site.offline', site_id: 18, event_id: 'y', since: 2 });
        await t.events.addEvent(toEventRow(held));
        await t.events.addEvent(toEventRow(other));
        await t.delivery.hold(held.id, 'inhibited:site.offline:18', null);
        await t.delivery.hold(other.id, 'maintenance:nightly', 'suppressed');
      });
      expect(await r.delivery.inhibitionSources(18)).toEqual(['site.offline']);
      const rows = await r.delivery.held('inhibited:site.offline:18');
      expect(rows).toEqual([{ id: held.id, rule: held.data.rule, subject: held.subject, status: 'firing', body: JSON.stringify(held), held_by: 'inhibited:site.offline:18', held_outcome: null }]);
      await tx(async (t) => {
        await t.delivery.setHeldOutcome(held.id, 'released');
        await t.delivery.endInhibition('site.offline', 18);
      });
      expect(await r.delivery.held('inhibited:site.offline:18')).toEqual([]);
      expect(await r.delivery.inhibitionSources(18)).toEqual([]);
      const recent = await r.delivery.recentHeld(50);
      expect(recent.filter((h) => h.id === held.id || h.id === other.id).map((h) => `${h.held_by}:${h.held_outcome}`)).toEqual([
        'maintenance:nightly:suppressed',
        'inhibited:site.offline:18:released',
      ]);
    });
  });
});
