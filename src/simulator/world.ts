/**
 * The simulator's in-memory world: sites with their health, usage and backups, plus the
 * account's jobs. Every change goes through an explicit method that also appends to
 * `history`, the ground truth a test compares hostwatch's events against.
 */
import { Drift } from './drift.js';
import { FAMILIES } from './families/index.js';
import { lowerBound } from './paging.js';
import { Random } from './random.js';
import { Resources } from './resources.js';
import { backupSize, onlineLabel, recomputeUsage, seedBackups, seedHealth, seedSite, seedUsage } from './seed.js';
import { MINUTES_PER_TICK } from './assumptions.js';
import { MINUTE_MS, displayUtc, isoUtc } from './time.js';
import {
  BACKUP_STATES,
  JOB_STATES,
  type BackupRecord,
  type BackupState,
  type HealthRecord,
  type HistoryEntry,
  type JobRecord,
  type JobState,
  type SiteRecord,
  type UsageRecord,
  type WorldSnapshot,
} from './types.js';

/** Retention caps keep a long demo run flat in memory; real panels rotate old backups too. */
export const MAX_BACKUPS_PER_SITE = 30;
export const MAX_JOBS = 1000;
export const MAX_HISTORY = 100_000;

const FINDING_CODES = ['core_checksums', 'site_url', 'admin_account', 'config_line', 'login_health'];
const BACKUP_FAILURE_RATE = 0.1;

/** Thrown by world methods; `code` is an API error code so the control interface can answer with it. */
export class SimulatorError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'SimulatorError';
  }
}

export interface WorldOptions {
  seed?: number;
  sites?: number;
  now?: () => Date;
  /** Seeded drift of the resource families on tick (default true); timers run regardless. */
  familyDrift?: boolean;
  /** Each tick moves the world's clock on by MINUTES_PER_TICK (S1), so throttles expire and timestamps advance with ticks; default false (the clock is `now` alone). */
  advanceClock?: boolean;
}

export interface HealthChange {
  status?: string;
  problems?: number;
}

export interface UsageChange {
  frozen?: boolean;
  diskUsedMib?: number;
  /** Database size and file count (usage.db_high, usage.inodes_high). */
  dbUsedMib?: number;
  inodesUsed?: number;
  /** What is over a limit besides disk ('disk' itself always follows disk.used_mib > disk.limit_mib). */
  over?: string[];
}

interface SiteState {
  site: SiteRecord;
  health: HealthRecord;
  usage: UsageRecord;
  /** Ascending id = oldest first; the API reverses. */
  backups: BackupRecord[];
}

/** A backup started through POST (or by drift) that tick() moves forward, with the job that follows it. */
interface Operation {
  siteId: number;
  backup: BackupRecord;
  jobId: number;
  startedTick: number;
}

/** The seeded, mutable state behind the simulated API. */
export class World {
  readonly seed: number;
  readonly history: HistoryEntry[] = [];
  /** The clock reading at creation: lazily seeded resources are dated from it, so reads never change them. */
  readonly epoch: Date;
  /** Every resource family beyond sites, health, usage, backups and jobs. */
  readonly resources: Resources;
  private tickCount = 0;
  private readonly rng: Random;
  private readonly now: () => Date;
  private readonly drift: Drift;
  /** Ascending by id, so cursors can binary-search instead of scanning. */
  private readonly siteList: SiteRecord[] = [];
  private readonly siteById = new Map<number, SiteState>();
  private readonly jobList: JobRecord[] = [];
  private readonly jobById = new Map<number, JobRecord>();
  private readonly operations = new Map<number, Operation>();
  private nextSiteId = 1;
  private nextBackupId = 1;
  private nextJobId = 1;

  constructor(opts: WorldOptions = {}) {
    this.seed = opts.seed ?? 1;
    const clock = opts.now ?? (() => new Date());
    this.now = opts.advanceClock ? () => new Date(clock().getTime() + this.tickCount * MINUTES_PER_TICK * MINUTE_MS) : clock;
    this.rng = new Random(this.seed);
    this.drift = new Drift(this, this.rng);
    this.epoch = this.now();
    this.resources = new Resources(this, FAMILIES);
    this.resources.driftEnabled = opts.familyDrift ?? true;
    const count = opts.sites ?? 5;
    for (let i = 0; i < count; i++) this.insertSite({});
    this.resources.seedAccountFamilies();
  }

  /** How many ticks have run. */
  get ticks(): number {
    return this.tickCount;
  }

  /** All sites, ascending by id (the live array: do not mutate it). */
  get sites(): readonly SiteRecord[] {
    return this.siteList;
  }

  /** All retained jobs, ascending by id (the live array: do not mutate it). */
  get jobs(): readonly JobRecord[] {
    return this.jobList;
  }

  /** The world's clock (injected). */
  time(): Date {
    return this.now();
  }

  /** Appends a history entry; resource families record through this. */
  note(kind: string, siteId: number | undefined, detail: Record<string, unknown>): void {
    this.record(kind, siteId, detail);
  }

  /** One site, or undefined. */
  getSite(id: number): SiteRecord | undefined {
    return this.siteById.get(id)?.site;
  }

  /** A site's health record, or undefined for an unknown site. */
  getHealth(siteId: number): HealthRecord | undefined {
    return this.siteById.get(siteId)?.health;
  }

  /** A site's usage record, or undefined for an unknown site. */
  getUsage(siteId: number): UsageRecord | undefined {
    return this.siteById.get(siteId)?.usage;
  }

  /** A site's backups ascending by id (oldest first), or undefined for an unknown site. */
  getBackups(siteId: number): readonly BackupRecord[] | undefined {
    return this.siteById.get(siteId)?.backups;
  }

  /** One backup of one site, or undefined. */
  getBackup(siteId: number, backupId: number): BackupRecord | undefined {
    return this.siteById.get(siteId)?.backups.find((b) => b.id === backupId);
  }

  /** One job, or undefined. */
  getJob(id: number): JobRecord | undefined {
    return this.jobById.get(id);
  }

  /** Adds a site with the next id; fields not given are drawn from the seeded stream. */
  addSite(partial: Partial<Omit<SiteRecord, 'id'>> = {}): SiteRecord {
    const site = this.insertSite(partial);
    this.record('site_added', site.id, { site: { ...site } });
    return site;
  }

  /** Removes a site with its health, usage and backups; its jobs stay in the account list. */
  removeSite(id: number): void {
    const state = this.requireSite(id);
    this.siteById.delete(id);
    this.siteList.splice(lowerBound(this.siteList, id), 1);
    this.drift.forget(id);
    this.resources.forgetSite(id);
    this.record('site_removed', id, { site: { ...state.site } });
    for (const b of state.backups) {
      const op = this.operations.get(b.id);
      if (!op) continue;
      // The job must not stay 'running' forever once its site is gone.
      this.operations.delete(b.id);
      this.setJobState(op.jobId, 'failed', 'site removed');
    }
  }

  /** Sets a site record's `state` string (e.g. 'Creating webserver config' while PHP changes). */
  setSiteState(id: number, state: string): SiteRecord {
    const { site } = this.requireSite(id);
    if (site.state !== state) {
      this.record('site_state', id, { before: site.state, after: state });
      site.state = state;
    }
    return site;
  }

  /** Removes one backup (DELETE /sites/{id}/backups/{backup_id}); the caller checks blueprint/locked. */
  deleteBackup(siteId: number, backupId: number): void {
    const state = this.requireSite(siteId);
    const i = state.backups.findIndex((b) => b.id === backupId);
    if (i < 0) throw new SimulatorError('not_found', `site ${siteId} has no backup ${backupId}`);
    state.backups.splice(i, 1);
    this.operations.delete(backupId);
    this.record('backup_deleted', siteId, { backup_id: backupId });
  }

  /** Changes online status and/or integrity problems; the label and findings follow. */
  setHealth(siteId: number, change: HealthChange): HealthRecord {
    const { health } = this.requireSite(siteId);
    // Validate everything before changing anything: a rejected call leaves no half-change.
    if (change.status !== undefined && (typeof change.status !== 'string' || change.status === '')) {
      throw new SimulatorError('validation_failed', 'status must be a non-empty string');
    }
    if (change.problems !== undefined && (!Number.isInteger(change.problems) || change.problems < 0)) {
      throw new SimulatorError('validation_failed', 'problems must be a non-negative integer');
    }
    const before = { status: health.online.status, problems: health.integrity.problems };
    if (change.status !== undefined && change.status !== health.online.status) {
      health.online = { status: change.status, label: onlineLabel(change.status) };
    }
    if (change.problems !== undefined && change.problems !== health.integrity.problems) {
      health.integrity = {
        checked: displayUtc(this.now()),
        status: change.problems > 0 ? 'problems' : 'ok',
        findings: findings(change.problems),
        problems: change.problems,
      };
    }
    const after = { status: health.online.status, problems: health.integrity.problems };
    if (before.status !== after.status || before.problems !== after.problems) {
      this.record('health_changed', siteId, { before, after });
    }
    return health;
  }

  /** Changes frozen / disk use / what is over; percent, disk.over and measured_at are recomputed. */
  setUsage(siteId: number, change: UsageChange): UsageRecord {
    const { usage } = this.requireSite(siteId);
    if (change.diskUsedMib !== undefined && (!Number.isFinite(change.diskUsedMib) || change.diskUsedMib < 0)) {
      throw new SimulatorError('validation_failed', 'diskUsedMib must be a non-negative number');
    }
    if (change.over !== undefined && !(Array.isArray(change.over) && change.over.every((x) => typeof x === 'string'))) {
      throw new SimulatorError('validation_failed', 'over must be an array of strings');
    }
    for (const [k, v] of [['dbUsedMib', change.dbUsedMib], ['inodesUsed', change.inodesUsed]] as const) {
      if (v !== undefined && (!Number.isFinite(v) || v < 0)) throw new SimulatorError('validation_failed', `${k} must be a non-negative number`);
    }
    const before = { frozen: usage.frozen, disk_used_mib: usage.disk.used_mib, percent: usage.disk.percent, over: usage.over, db_used_mib: usage.db.used_mib, inodes_used: usage.inodes.used };
    if (change.frozen !== undefined) usage.frozen = Boolean(change.frozen);
    if (change.diskUsedMib !== undefined) usage.disk.used_mib = change.diskUsedMib;
    if (change.dbUsedMib !== undefined) usage.db.used_mib = change.dbUsedMib;
    if (change.inodesUsed !== undefined) usage.inodes.used = change.inodesUsed;
    recomputeUsage(usage, change.over ?? usage.over);
    const after = { frozen: usage.frozen, disk_used_mib: usage.disk.used_mib, percent: usage.disk.percent, over: usage.over, db_used_mib: usage.db.used_mib, inodes_used: usage.inodes.used };
    const figuresChanged =
      before.disk_used_mib !== after.disk_used_mib || before.over.join() !== after.over.join() || before.db_used_mib !== after.db_used_mib || before.inodes_used !== after.inodes_used;
    if (figuresChanged) usage.disk.measured_at = isoUtc(this.now());
    if (figuresChanged || before.frozen !== after.frozen) this.record('usage_changed', siteId, { before, after });
    return usage;
  }

  /** Adds a backup in the given state (default a Pending Manual one); it stays put: only startBackup's backups advance on tick. */
  addBackup(siteId: number, opts: { state?: BackupState; type?: string } = {}): BackupRecord {
    const state = this.requireSite(siteId);
    const backupState = opts.state ?? 'Pending';
    assertBackupState(backupState);
    const backup: BackupRecord = {
      id: this.nextBackupId++,
      created_at: isoUtc(this.now()),
      type: opts.type ?? 'Manual',
      state: backupState,
      size_bytes: backupState === 'Ok' ? backupSize(this.rng, state.usage) : 0,
      is_blueprint: false,
      locked: false,
    };
    state.backups.push(backup);
    this.record('backup_added', siteId, { backup: { ...backup } });
    this.pruneBackups(siteId, state.backups);
    return backup;
  }

  /** Moves a backup to a state; a final state also finishes the job that follows it. */
  setBackupState(siteId: number, backupId: number, state: BackupState): BackupRecord {
    assertBackupState(state);
    const backup = this.getBackup(siteId, backupId);
    if (!backup) throw new SimulatorError('not_found', `site ${siteId} has no backup ${backupId}`);
    const before = backup.state;
    if (before !== state) {
      backup.state = state;
      if (state === 'Ok' && backup.size_bytes === 0) backup.size_bytes = backupSize(this.rng, this.getUsage(siteId));
      this.record('backup_state', siteId, { backup_id: backupId, before, after: state });
    }
    const op = this.operations.get(backupId);
    if (op && (state === 'Ok' || state === 'Error')) {
      this.operations.delete(backupId);
      if (state === 'Ok') this.setJobState(op.jobId, 'done');
      else this.setJobState(op.jobId, 'failed', 'backup failed: the archive could not be written');
    }
    return backup;
  }

  /** What POST /sites/{id}/backups does: a Pending backup plus a queued job, both advanced by tick(). */
  startBackup(siteId: number, type = 'Manual'): { backup: BackupRecord; job: JobRecord } {
    const backup = this.addBackup(siteId, { state: 'Pending', type });
    const job = this.addJob({ type: 'backup', site_id: siteId });
    this.operations.set(backup.id, { siteId, backup, jobId: job.id, startedTick: this.tickCount });
    return { backup, job };
  }

  /** Adds a job (default a queued 'backup' job without a site). */
  addJob(partial: Partial<Omit<JobRecord, 'id'>> = {}): JobRecord {
    const state = partial.state ?? 'queued';
    assertJobState(state);
    const at = isoUtc(this.now());
    const final = state === 'done' || state === 'failed';
    const job: JobRecord = {
      id: this.nextJobId++,
      type: partial.type ?? 'backup',
      state,
      site_id: partial.site_id ?? null,
      created_at: partial.created_at ?? at,
      updated_at: partial.updated_at ?? at,
      finished_at: partial.finished_at ?? (final ? at : null),
      error: partial.error ?? (state === 'failed' ? 'failed' : null),
    };
    this.jobList.push(job);
    this.jobById.set(job.id, job);
    this.record('job_added', job.site_id ?? undefined, { job: { ...job } });
    this.pruneJobs();
    return job;
  }

  /** Moves a job to a state; final states set finished_at, 'failed' keeps or sets an error. */
  setJobState(id: number, state: JobState, error?: string): JobRecord {
    assertJobState(state);
    const job = this.jobById.get(id);
    if (!job) throw new SimulatorError('not_found', `no job ${id}`);
    const before = job.state;
    if (before === state && error === undefined) return job;
    const at = isoUtc(this.now());
    job.state = state;
    job.updated_at = at;
    job.finished_at = state === 'done' || state === 'failed' ? at : null;
    job.error = state === 'failed' ? (error ?? job.error ?? 'failed') : null;
    this.record('job_state', job.site_id ?? undefined, { job_id: id, before, after: state, error: job.error });
    return job;
  }

  /** One step of simulated time: started backups advance, then seeded drift touches at most a few sites. */
  tick(): void {
    this.tickCount++;
    this.record('tick', undefined, { tick: this.tickCount });
    this.advanceOperations();
    this.drift.step(this.tickCount);
    this.resources.tick(this.tickCount);
  }

  /** A deep copy of everything, for comparing two worlds. */
  snapshot(): WorldSnapshot {
    const backups: Record<number, BackupRecord[]> = {};
    for (const site of this.siteList) backups[site.id] = this.siteById.get(site.id)?.backups ?? [];
    return structuredClone({
      tick: this.tickCount,
      sites: this.siteList,
      health: this.siteList.map((s) => this.siteById.get(s.id)?.health as HealthRecord),
      usage: this.siteList.map((s) => this.siteById.get(s.id)?.usage as UsageRecord),
      backups,
      jobs: this.jobList,
      resources: this.resources.snapshot(),
    });
  }

  private insertSite(partial: Partial<Omit<SiteRecord, 'id'>>): SiteRecord {
    const now = this.now();
    const site = seedSite(this.rng, this.nextSiteId++, now, partial);
    const usage = seedUsage(this.rng, site.id, now);
    const state: SiteState = {
      site,
      health: seedHealth(this.rng, site.id, now),
      usage,
      backups: seedBackups(this.rng, now, usage, () => this.nextBackupId++),
    };
    this.siteList.push(site);
    this.siteById.set(site.id, state);
    return site;
  }

  private advanceOperations(): void {
    for (const op of this.operations.values()) {
      // A backup started during this tick waits for the next one, as a real one would.
      if (op.startedTick >= this.tickCount) continue;
      const { backup, siteId } = op;
      if (backup.state === 'Pending') {
        this.setBackupState(siteId, backup.id, 'Creating');
        this.setJobState(op.jobId, 'running');
      } else if (backup.state === 'Creating' || backup.state === 'Storing') {
        this.setBackupState(siteId, backup.id, this.rng.chance(BACKUP_FAILURE_RATE) ? 'Error' : 'Ok');
      } else {
        // Moved to a final state from outside; setBackupState finishes the job.
        this.setBackupState(siteId, backup.id, backup.state);
      }
    }
  }

  private pruneBackups(siteId: number, backups: BackupRecord[]): void {
    while (backups.length > MAX_BACKUPS_PER_SITE) {
      const index = backups.findIndex((b) => !this.operations.has(b.id));
      if (index < 0) return;
      const [gone] = backups.splice(index, 1);
      this.record('backup_pruned', siteId, { backup_id: gone?.id });
    }
  }

  private pruneJobs(): void {
    // Prune in batches so adding a job stays O(1) amortised.
    if (this.jobList.length <= MAX_JOBS + 100) return;
    let excess = this.jobList.length - MAX_JOBS;
    const kept: JobRecord[] = [];
    for (const job of this.jobList) {
      const final = job.state === 'done' || job.state === 'failed';
      if (excess > 0 && final) {
        excess--;
        this.jobById.delete(job.id);
        this.record('job_pruned', job.site_id ?? undefined, { job_id: job.id });
      } else {
        kept.push(job);
      }
    }
    this.jobList.length = 0;
    this.jobList.push(...kept);
  }

  private requireSite(id: number): SiteState {
    const state = this.siteById.get(id);
    if (!state) throw new SimulatorError('not_found', `no site ${id}`);
    return state;
  }

  private record(kind: string, siteId: number | undefined, detail: Record<string, unknown>): void {
    this.history.push(siteId === undefined ? { at: isoUtc(this.now()), kind, detail } : { at: isoUtc(this.now()), kind, site_id: siteId, detail });
    if (this.history.length > MAX_HISTORY + MAX_HISTORY / 10) this.history.splice(0, this.history.length - MAX_HISTORY);
  }
}

function findings(problems: number): { code: string; message: string }[] {
  const out: { code: string; message: string }[] = [];
  for (let i = 0; i < problems; i++) {
    const code = FINDING_CODES[i % FINDING_CODES.length] as string;
    out.push({ code, message: `integrity check failed: ${code.replace('_', ' ')}` });
  }
  return out;
}

function assertBackupState(state: string): asserts state is BackupState {
  if (!BACKUP_STATES.includes(state as BackupState)) {
    throw new SimulatorError('validation_failed', `backup state must be one of ${BACKUP_STATES.join(', ')}`);
  }
}

function assertJobState(state: string): asserts state is JobState {
  if (!JOB_STATES.includes(state as JobState)) {
    throw new SimulatorError('validation_failed', `job state must be one of ${JOB_STATES.join(', ')}`);
  }
}
