/**
 * Change seen → webhook accepted (PRODUCT.md: p99 under 250 ms after the poll that saw it).
 *
 * The daemon runs in this process as in production: the outbox worker started, polls driven
 * by full cycles (Scheduler.runAll) against the simulator in a child process, a webhook
 * channel pointing at a local node:http receiver that answers 204. Each round changes the
 * world (sites go offline, finished backups appear), then runs one full cycle. For every
 * event, the clock starts when the poll that saw it has committed (AppOptions.onEvents, called
 * right after the transaction) and stops when the receiver has read the whole request
 * ("arrived"), and when the worker has recorded the 2xx ("accepted", onAttempt). For the
 * events of a poll, a second clock starts when its reply was in (parsed, about to be
 * hashed and planned: Poller.ingest is entered), so it also counts the group commit's
 * gather wait and the transaction ("seen"); that is the interval the target is about.
 *
 * Baseline in the same run: the same channel (WebhookChannel.send: sign + POST) sending
 * events one by one to the same receiver, timed from the call to arrival — the floor any
 * delivery pays on this machine.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { WebhookChannelConfig } from '../src/config/types.js';
import type { HostwatchEvent } from '../src/events/types.js';
import { createApp } from '../src/main.js';
import { WebhookChannel } from '../src/notify/channels/webhook.js';
import { BENCH_SECRET, nullStream, percentile, pool, round, startSimChild, tempDir } from './common.js';
import { benchConfig } from './config.js';

export interface LatencyStats {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface LatencyResult {
  sites: number;
  rounds: number;
  events: number;
  /** Commit of the poll that saw the change → the receiver has the request. */
  arrived: LatencyStats;
  /** Commit → the outbox worker recorded the 2xx (delivered). */
  accepted: LatencyStats;
  /** The poll's reply was in → its commit (the gather wait and the transaction), for the events of polls. */
  seenToCommit: LatencyStats;
  /** The poll's reply was in → the outbox worker recorded the 2xx: the target's interval. */
  seenToAccepted: LatencyStats;
  /** Baseline: one signed POST of an event to the same receiver. */
  barePost: LatencyStats;
  /** p99 arrived / p99 bare POST. */
  ratioP99: number;
  /** Full-cycle time of the rounds (ms), for context. */
  cycleMs: number[];
}

function stats(xs: number[]): LatencyStats {
  return {
    n: xs.length,
    p50: round(percentile(xs, 50), 1),
    p90: round(percentile(xs, 90), 1),
    p99: round(percentile(xs, 99), 1),
    max: round(Math.max(...xs), 1),
  };
}

export async function benchLatency(opts: { sites?: number; rounds?: number; log?: (l: string) => void } = {}): Promise<LatencyResult> {
  const sites = opts.sites ?? 500;
  const rounds = opts.rounds ?? 4;
  const log = opts.log ?? (() => {});
  const arrivedAt = new Map<string, number>();
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['webhook-id'] ?? '');
      if (!arrivedAt.has(id)) arrivedAt.set(id, performance.now());
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const sim = await startSimChild({ sites });
  const tmp = tempDir();
  const committedAt = new Map<string, number>();
  const acceptedAt = new Map<string, number>();
  // When the reply of the poll now running was in (Poller.ingest entered), in its async context.
  const replyIn = new AsyncLocalStorage<number>();
  const seenAt = new Map<string, number>();
  const sample: HostwatchEvent[] = [];
  const perSite: string[] = [];
  const app = await createApp(benchConfig({ url: sim.url, dbPath: `${tmp.dir}/latency.db`, webhookUrl: hook }), {
    logDestination: nullStream(),
    onEvents: (events) => {
      const now = performance.now();
      const seen = replyIn.getStore();
      for (const e of events) {
        committedAt.set(e.id, now);
        if (seen !== undefined) seenAt.set(e.id, seen);
        if (e.data.site_id !== null) perSite.push(e.id);
        if (sample.length < 200) sample.push(e);
      }
    },
    onAttempt: ({ event, result }) => {
      if (result.ok && !acceptedAt.has(event.id)) acceptedAt.set(event.id, performance.now());
    },
  });
  // Poller.poll calls this.ingest once the reply is in: the events its commit announces
  // (onEvents, in the same async context) were seen at that moment. Incident events,
  // stored when a cycle ends, were seen by no one reply and have no such time.
  const ingest = app.poller.ingest.bind(app.poller);
  app.poller.ingest = (...args) => replyIn.run(performance.now(), () => ingest(...args));
  try {
    app.worker.start();
    await app.scheduler.runAll(); // baseline: a fresh world fires nothing
    const cycleMs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      // 10% of sites go offline (site.offline firing), another 10% get a finished backup (backup.completed).
      const offline = app.poller.sites().filter((s) => s.id % 10 === r);
      const backup = app.poller.sites().filter((s) => s.id % 10 === r + 5);
      await pool(offline, 8, (s) => sim.control('POST', `/sites/${s.id}/health`, { status: 'offline' }));
      await pool(backup, 8, (s) => sim.control('POST', `/sites/${s.id}/backups`, { state: 'Ok', type: 'Manual' }));
      const before = perSite.length;
      const t0 = performance.now();
      await app.scheduler.runAll();
      cycleMs.push(Math.round(performance.now() - t0));
      // 10% of the sites offline at once is also a platform incident (its events are
      // measured too); the per-site events must be exactly the changes made.
      const expected = offline.length + backup.length;
      if (perSite.length - before !== expected) throw new Error(`round ${r}: ${perSite.length - before} per-site events, expected ${expected}`);
      const deadline = performance.now() + 30_000;
      while ([...committedAt.keys()].some((id) => !acceptedAt.has(id))) {
        if (performance.now() > deadline) throw new Error('deliveries did not finish within 30 s');
        await new Promise((r) => setTimeout(r, 5));
      }
      log(`latency: round ${r + 1}/${rounds}: ${expected} events, cycle ${cycleMs[r]} ms`);
    }
    const arrived: number[] = [];
    const accepted: number[] = [];
    const seenToCommit: number[] = [];
    const seenToAccepted: number[] = [];
    for (const [id, t] of committedAt) {
      arrived.push(arrivedAt.get(id)! - t);
      accepted.push(acceptedAt.get(id)! - t);
      const seen = seenAt.get(id);
      if (seen === undefined) continue;
      seenToCommit.push(t - seen);
      seenToAccepted.push(acceptedAt.get(id)! - seen);
    }
    if (seenToAccepted.length < perSite.length) throw new Error(`${perSite.length - seenToAccepted.length} per-site events have no reply time`);

    // Baseline: the bare signed POST, one at a time, same receiver, same events.
    const bareConfig: WebhookChannelConfig = { name: 'bare', type: 'webhook', url: hook, secret: BENCH_SECRET, secrets: [BENCH_SECRET], timeout_ms: 10_000, mode: 'structured', template: null };
    const channel = new WebhookChannel(bareConfig);
    const bare: number[] = [];
    for (let i = 0; i < 2; i++) {
      for (const e of sample) {
        const probe = { ...e, id: `${e.id}-bare-${i}` };
        const body = JSON.stringify(probe);
        const t0 = performance.now();
        const res = await channel.send(probe, body);
        if (!res.ok) throw new Error(`bare POST failed: ${res.error}`);
        if (i === 1) bare.push(arrivedAt.get(probe.id)! - t0); // the first pass warms the connection up
      }
    }
    await channel.close();
    const arrivedStats = stats(arrived);
    const bareStats = stats(bare);
    return {
      sites,
      rounds,
      events: committedAt.size,
      arrived: arrivedStats,
      accepted: stats(accepted),
      seenToCommit: stats(seenToCommit),
      seenToAccepted: stats(seenToAccepted),
      barePost: bareStats,
      ratioP99: round(arrivedStats.p99 / bareStats.p99, 1),
      cycleMs,
    };
  } finally {
    await app.stop();
    await sim.close();
    const closed = new Promise<void>((resolve) => receiver.close(() => resolve()));
    receiver.closeAllConnections();
    await closed;
    tmp.cleanup();
  }
}
