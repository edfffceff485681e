import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import type { Command } from 'commander';
import type { Config } from '../config/types.js';
import type { Store } from '../store/db.js';
import type { HeldView } from '../store/delivery-repo.js';
import type { Repos } from '../store/repos.js';
import type { DeliveryView } from '../store/events-repo.js';
import { deliveryJson, heldJson, unknownChannel } from './delivery-views.js';
import { terminalJson, terminalLine } from './channels/render.js';
import type { Silence, SilenceView } from './silences.js';

/** What the delivery commands borrow from cli.ts (config loading, exits, argument parsers). */
export interface CliHelpers {
  /** Load the config (`-c`, else the default file); these commands need no secret. */
  load(file: string | undefined, opts: { secretsOptional: boolean; serverUnused: boolean }): Promise<Config>;
  fail(message: string, code: number): never;
  /** Open the config's database (migrating it); exits with a clear message when it cannot, or does not exist yet. */
  openDatabase(config: Config, mustExist: boolean): Promise<Store>;
  /** What `-c` says in help. */
  configHelp: string;
  duration(v: string): number;
  atLeastOne(v: string): number;
}

const EXIT_ARGS = 2;

type Runtime = Awaited<ReturnType<typeof runtime>>;

/**
 * What the commands run with. Loaded when one of them runs, not when `hostwatch` starts:
 * they bring the query builder and the CEL compiler, which `--version` and `check` do without.
 */
async function runtime() {
  const [{ repos }, { daemonRunning }, { RECENTLY_EXPIRED_MS }, { parseSilenceRequest, silenceView, sortSilences }] = await Promise.all([
    import('../store/repos.js'),
    import('../store/daemon-repo.js'),
    import('../server/routes/silences.js'),
    import('./silences.js'),
  ]);
  return { repos, daemonRunning, RECENTLY_EXPIRED_MS, parseSilenceRequest, silenceView, sortSilences };
}

/**
 * Open the config's database (migrated like the daemon's), run `fn` with the commands'
 * modules, close it. The database must exist: only `hostwatch run` (or `poll --once`) creates
 * it and its folder. These commands call no API and no channel, so they need none of the
 * config's secrets.
 */
async function withStore<T>(h: CliHelpers, file: string | undefined, fn: (store: Store, config: Config, m: Runtime) => Promise<T>): Promise<T> {
  const config = await h.load(file, { secretsOptional: true, serverUnused: true });
  // The database first: a missing one ends the command before the modules below load.
  const store = await h.openDatabase(config, true);
  try {
    return await fn(store, config, await runtime());
  } finally {
    await store.close();
  }
}

// Rows hold API text (subjects, receivers' answers) and people's (silence comments): see terminalLine.
const out = (line: string): void => void process.stdout.write(`${terminalLine(line)}\n`);
const outJson = (value: unknown): void => void process.stdout.write(`${terminalJson(JSON.stringify(value))}\n`);

/**
 * The names of the events the config's rules can send, to check a silence's `name` and
 * `type` against; undefined when its rules do not load (a silence is what one adds in a
 * hurry, so a broken rule file does not stop it: its names are then not checked, and the
 * user is told).
 */
async function eventNamesOf(config: Config): Promise<readonly string[] | undefined> {
  const [{ rulesFor }, { knownEventNames }] = await Promise.all([import('../rules/parse.js'), import('../events/catalog.js')]);
  try {
    return knownEventNames(rulesFor(config));
  } catch {
    process.stderr.write('(the rules of this config do not load, so the event names in --match were not checked; hostwatch check says why)\n');
    return undefined;
  }
}

/**
 * A silence as one line of `silence list`: when it holds (an active one: until when, and the
 * time left; a pending one: from when, and until when; an ended one: when it ended, and, if
 * it was expired early, until when it was meant to hold).
 */
export function silenceLine(v: SilenceView, now: number): string {
  const ends = Date.parse(v.ends_at);
  const when =
    v.state === 'active'
      ? `until ${v.ends_at}  (ends in ${humanMs(ends - now)})`
      : v.state === 'pending'
        ? `from ${v.starts_at} until ${v.ends_at}  (starts in ${humanMs(Date.parse(v.starts_at) - now)})`
        : v.expired_at !== null && Date.parse(v.expired_at) < ends
          ? `ended ${v.expired_at}  (expired early; it was until ${v.ends_at})`
          : `ended ${v.ends_at}`;
  return `${v.id}  ${v.state.padEnd(7)}  ${when}  ${v.match}  — ${v.comment} (${v.created_by}; ${v.suppressed} held back)`;
}

/** One row of `hostwatch deliveries`. */
export function deliveryLine(d: DeliveryView): string {
  const status = d.last_status === null ? '-' : String(d.last_status);
  const due = new Date(d.next_attempt_at).toISOString();
  // A row held behind an earlier one of the same alert goes after it, not at its own due time.
  const next = d.state !== 'pending' ? '' : d.waits_behind !== null ? ` next after #${d.waits_behind} (due ${due})` : ` next ${due}`;
  const why = d.last_error ? `  ${d.last_error}` : '';
  return `${new Date(d.updated_at).toISOString()}  ${d.state.padEnd(9)} ${d.channel.padEnd(12)} attempts ${d.attempts}  last ${status}${next}  ${d.type} ${d.subject}  ${d.event_id} (#${d.id})${why}`;
}

/** One row of `hostwatch deliveries --held`: an event that was stored but held back, and why. */
export function heldLine(h: HeldView): string {
  const why = h.silenced_by ? `silenced by ${h.silenced_by}` : `${h.held_by} (${h.held_outcome ?? 'held'})`;
  return `${new Date(h.time).toISOString()}  ${h.type} ${h.subject}  ${h.id}  ${why}`;
}

/** An outbox row number as `deliveries` prints it (`#42`, or `42`); null for anything else (an event id). */
function rowNumber(id: string): number | null {
  return /^#?\d+$/.test(id) ? Number(id.replace('#', '')) : null;
}

/** Why `redeliver` found nothing to send again: no such row or event, or an event that has no delivery (to that channel). */
async function nothingToSend(r: Repos, id: string | undefined, channel: string | undefined): Promise<string> {
  const to = channel === undefined ? '' : ` to channel ${channel}`;
  if (id === undefined) return `nothing dead-lettered${to} to send again (see hostwatch deliveries --failed)`;
  const row = rowNumber(id);
  if (row !== null) return `no outbox row #${row}${to} (see hostwatch deliveries)`;
  const event = await r.history.event(id);
  if (event === undefined) return `no event with id "${id}" (hostwatch events lists them, each with its whole id)`;
  const rows = await r.events.outboxFor(id);
  if (rows.length > 0) return `event ${id} has no delivery${to}; its deliveries are to ${[...new Set(rows.map((x) => x.channel))].join(', ')}`;
  const why = event.silenced_by
    ? `it was silenced (by ${event.silenced_by})`
    : event.held_by
      ? `it was held back (${event.held_by}${event.held_outcome ? `, ${event.held_outcome}` : ''})`
      : 'no route sent it to a channel';
  return `event ${id} was stored but never queued for delivery: ${why}; hostwatch explain ${id} says more`;
}

/** A `--channel` must name a channel (see unknownChannel): exit 2 with the channels otherwise. */
async function knownChannel(h: CliHelpers, command: string, config: Config, r: Repos, name: string): Promise<void> {
  const problem = await unknownChannel(config.channels, r.events, name);
  if (problem !== null) h.fail(`hostwatch ${command}: --channel: ${problem}`, EXIT_ARGS);
}

/** Who runs this command, for a silence's author: $USER, else the login name. */
function currentUser(): string {
  const env = process.env['USER'] || process.env['LOGNAME'];
  if (env) return env;
  try {
    return userInfo().username;
  } catch {
    return 'cli';
  }
}

function humanMs(ms: number): string {
  const m = Math.max(0, Math.round(ms / 60_000));
  return m < 90 ? `${m}m` : m < 48 * 60 ? `${Math.round(m / 60)}h` : `${Math.round(m / 1440)}d`;
}

/** Register `silence add|list|expire`, `deliveries` and `redeliver` (the database is shared with a running daemon). */
export function registerDeliveryCommands(program: Command, h: CliHelpers): void {
  const silence = program.command('silence').description('hold back delivery of matching events for a while (they are still stored)');

  silence
    .command('add')
    .description('add a silence: hostwatch silence add --match "site_id == 12" --for 2h --comment "moving servers"')
    .option('-c, --config <file>', `${h.configHelp}; its storage (path or url) is used`)
    .requiredOption('--match <cel>', 'CEL over type, name, severity, status, subject, site_id, domain, rule, labels; amtool matchers (name="x", site_id=12) work too')
    .requiredOption('--for <duration>', 'how long, like 30m, 2h or 1d')
    .requiredOption('--comment <text>', 'why, and who is on it')
    .option('--by <name>', 'who adds it', currentUser())
    .action(async (o: { config?: string; match: string; for: string; comment: string; by: string }) => {
      const config = await h.load(o.config, { secretsOptional: true, serverUnused: true });
      const { repos, parseSilenceRequest, silenceView } = await runtime();
      const now = Date.now();
      const parsed = parseSilenceRequest({ match: o.match, duration: o.for, comment: o.comment, created_by: o.by }, now, {
        createdBy: 'cli',
        maxDurationMs: config.silences.max_duration_ms,
        eventNames: await eventNamesOf(config),
      });
      if (!parsed.ok) {
        // The CLI's names for the request's fields.
        const flag: Record<string, string> = { match: '--match', duration: '--for', comment: '--comment', created_by: '--by' };
        h.fail(parsed.errors.map((e) => `hostwatch silence add: ${flag[e.field] ?? e.field}: ${e.message}`).join('\n'), EXIT_ARGS);
      }
      // Unlike the other commands, this one creates the database (and its folder) where the
      // config puts it when there is none yet: a site is silenced before the first start too,
      // and the daemon then finds the silence there.
      const store = await h.openDatabase(config, false);
      try {
        const s: Silence = { id: randomUUID(), ...parsed.silence };
        await store.transaction((tx) => repos(tx).silences.add(s));
        out(silenceLine(silenceView(s, now, 0), now));
        if (parsed.translated) process.stderr.write(`(read the amtool matchers ${parsed.translated.from} as the CEL: ${parsed.translated.to})\n`);
      } finally {
        await store.close();
      }
    });

  silence
    .command('list')
    .description('active and pending silences, and those that ended in the last 7 days')
    .option('-c, --config <file>', h.configHelp)
    .option('--expiring <duration>', 'only active silences that end within DURATION (e.g. 1h)', h.duration)
    .option('--json', 'one JSON object per line')
    .action(async (o: { config?: string; expiring?: number; json?: boolean }) => {
      await withStore(h, o.config, async (store, _config, { repos, RECENTLY_EXPIRED_MS, silenceView, sortSilences }) => {
        const repo = repos(store).silences;
        const now = Date.now();
        const recent = sortSilences(await repo.recent(now, now - RECENTLY_EXPIRED_MS), now);
        let list: SilenceView[] = [];
        for (const s of recent) list.push(silenceView(s, now, await repo.suppressed(s.id)));
        if (o.expiring !== undefined) list = list.filter((v) => v.state === 'active' && Date.parse(v.ends_at) - now <= o.expiring!);
        for (const v of list) (o.json ? outJson(v) : out(silenceLine(v, now)));
        if (list.length === 0 && !o.json) process.stderr.write('(no silences)\n');
      });
    });

  silence
    .command('expire')
    .description('end a silence now')
    .argument('<id>', 'the silence id (from silence list)')
    .option('-c, --config <file>', h.configHelp)
    .action(async (id: string, o: { config?: string }) => {
      await withStore(h, o.config, async (store, _config, { repos, silenceView }) => {
        const repo = repos(store).silences;
        const now = Date.now();
        if (!(await repo.get(id))) h.fail(`hostwatch silence expire: no silence with id "${id}" (see hostwatch silence list)`, EXIT_ARGS);
        const changed = await store.transaction((tx) => repos(tx).silences.expire(id, now));
        out(`${changed ? 'expired' : 'already over'}: ${silenceLine(silenceView((await repo.get(id))!, now, await repo.suppressed(id)), now)}`);
      });
    });

  program
    .command('deliveries')
    .description('what was sent where: state, attempts, last answer (newest first)')
    .option('-c, --config <file>', h.configHelp)
    .option('--failed', 'only dead-lettered rows and rows waiting to retry')
    .option('--pending', 'only rows still to send (due now, waiting to retry, or in a group wait)')
    .option('--channel <name>', 'only this channel')
    .option('--held', 'instead: events stored but held back (silence, maintenance window, inhibition) and what became of them')
    .option('--limit <n>', 'at most N rows', h.atLeastOne, 100)
    .option('--json', 'one JSON object per line')
    .action(async (o: { config?: string; failed?: boolean; pending?: boolean; channel?: string; held?: boolean; limit: number; json?: boolean }) => {
      if (o.held && (o.failed || o.pending || o.channel !== undefined)) {
        const given = [o.failed && '--failed', o.pending && '--pending', o.channel !== undefined && '--channel'].filter(Boolean).join(', ');
        h.fail(`hostwatch deliveries: --held lists the held events of every channel, which have no outbox rows: ${given} cannot filter it`, EXIT_ARGS);
      }
      await withStore(h, o.config, async (store, config, { repos }) => {
        const r = repos(store);
        if (o.channel !== undefined) await knownChannel(h, 'deliveries', config, r, o.channel);
        if (o.held) {
          const held = await r.delivery.recentHeld(o.limit);
          for (const r of held) (o.json ? outJson(heldJson(r)) : out(heldLine(r)));
          if (held.length === 0 && !o.json) process.stderr.write('(no held events)\n');
          return;
        }
        const rows = await r.events.deliveries({ failed: o.failed === true, pending: o.pending === true, channel: o.channel ?? null }, o.limit);
        for (const row of rows) (o.json ? outJson(deliveryJson(row)) : out(deliveryLine(row)));
        for (const c of await r.delivery.disabledChannels()) {
          if (o.channel === undefined || o.channel === c.channel) {
            process.stderr.write(`channel ${c.channel} is DISABLED since ${new Date(c.disabled_at!).toISOString()}: ${c.disabled_reason} (hostwatch redeliver --dead --channel ${c.channel} enables it)\n`);
          }
        }
        if (rows.length === 0 && !o.json) process.stderr.write('(no deliveries)\n');
      });
    });

  program
    .command('redeliver')
    .description('send again, with the same event id: one event (ID), one outbox row (#N), or every dead-lettered row (--dead)')
    .argument('[id]', 'an event id, or an outbox row number from hostwatch deliveries')
    .option('-c, --config <file>', h.configHelp)
    .option('--dead', 'every dead-lettered row (and re-enable the disabled channels it covers)')
    .option('--channel <name>', 'only this channel')
    .action(async (id: string | undefined, o: { config?: string; dead?: boolean; channel?: string }) => {
      if ((id === undefined) === (o.dead !== true)) {
        h.fail(`hostwatch redeliver: ${id === undefined ? 'nothing was given: give an event id (or #row), or --dead' : 'both were given: give an event id (or #row) or --dead, not both'}`, EXIT_ARGS);
      }
      // No event id starts with #: this was meant as a row number.
      if (id?.startsWith('#') && rowNumber(id) === null) {
        h.fail(`hostwatch redeliver: ${id} is not an outbox row number: give #N as hostwatch deliveries prints it (like #42), or an event id`, EXIT_ARGS);
      }
      await withStore(h, o.config, async (store, config, { repos, daemonRunning }) => {
        if (o.channel !== undefined) await knownChannel(h, 'redeliver', config, repos(store), o.channel);
        const now = Date.now();
        const enabled: string[] = [];
        const n = await store.transaction(async (tx) => {
          const { events, delivery } = repos(tx);
          if (o.dead) {
            // A disabled channel would dead-letter them again at once.
            for (const c of await delivery.disabledChannels()) {
              if (o.channel === undefined || o.channel === c.channel) {
                await delivery.putChannelState({ ...c, disabled_at: null, disabled_reason: null, failing_since: null });
                enabled.push(c.channel);
              }
            }
            return events.redeliver({ dead: true }, o.channel ?? null, now);
          }
          const row = rowNumber(id!);
          return events.redeliver(row === null ? { eventId: id! } : { outboxId: row }, o.channel ?? null, now);
        });
        for (const c of enabled) out(`channel ${c} enabled again`);
        // Nothing dead is no failure (a script runs --dead after a move, say): exit 0. An id or
        // row that has nothing to send again is one (exit 1).
        if (n === 0 && o.dead) return out(`hostwatch redeliver: ${await nothingToSend(repos(store), id, o.channel)}`);
        if (n === 0) h.fail(`hostwatch redeliver: ${await nothingToSend(repos(store), id, o.channel)}`, 1);
        const them = n === 1 ? 'it' : 'them';
        const beat = await repos(store).daemon.latest();
        const who = daemonRunning(beat, now)
          ? `the daemon running on this database (pid ${beat!.pid} on ${beat!.host}) sends ${them} within a second`
          : `no daemon is running on this database${beat ? ` (last seen ${new Date(beat.seen_at).toISOString()})` : ''}: \`hostwatch run\` sends ${them} when it starts, or \`hostwatch poll --once\` now`;
        out(`${n} ${n === 1 ? 'delivery' : 'deliveries'} queued again; ${who}`);
      });
    });
}
