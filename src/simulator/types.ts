/**
 * Record shapes the simulator serves. They follow the spec ("Site usage", "Site health",
 * "Backup") and docs/api-assumptions.md (A4 site record, A5 job record).
 */

export type OnlineStatus = 'online' | 'offline' | 'slow' | 'paused';
export type BackupState = 'Pending' | 'Creating' | 'Ok' | 'Error' | 'Storing';
export type JobState = 'queued' | 'running' | 'done' | 'failed';

export const BACKUP_STATES: readonly BackupState[] = ['Pending', 'Creating', 'Ok', 'Error', 'Storing'];
export const JOB_STATES: readonly JobState[] = ['queued', 'running', 'done', 'failed'];

/** A4: the site record of GET /sites. */
export interface SiteRecord {
  id: number;
  domain: string;
  name: string;
  state: string;
  created_at: string;
}

/** Spec "Site health". A8: statuses beyond the four named are passed through. */
export interface HealthRecord {
  site_id: number;
  online: { status: OnlineStatus | (string & {}); label: string };
  integrity: {
    /** Human-readable UTC display string, 'YYYY-MM-DD HH:MM UTC'. */
    checked: string;
    status: string;
    /** A9: item shape not shown; the simulator uses {code, message}. */
    findings: { code: string; message: string }[];
    problems: number;
  };
}

/** Spec "Site usage". */
export interface UsageRecord {
  site_id: number;
  state: string;
  frozen: boolean;
  over: string[];
  disk: {
    used_mib: number;
    limit_mib: number;
    included_mib: number;
    addon_mib: number;
    percent: number;
    over: boolean;
    measured_at: string;
  };
  db: { used_mib: number; limit_mib: number };
  inodes: { used: number; limit: number };
  bandwidth: null;
  addons: unknown[];
  busy: boolean;
}

/** Spec "Backup". */
export interface BackupRecord {
  id: number;
  created_at: string;
  type: string;
  state: BackupState;
  size_bytes: number;
  is_blueprint: boolean;
  locked: boolean;
}

/** A5: the job record of GET /jobs. */
export interface JobRecord {
  id: number;
  type: string;
  state: JobState;
  site_id: number | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  error: string | null;
}

/** One entry of the world's ground-truth log: what changed, when, and where. */
export interface HistoryEntry {
  at: string;
  kind: string;
  site_id?: number;
  detail: Record<string, unknown>;
}

/** Everything the world holds, as plain JSON (for comparisons in tests). */
export interface WorldSnapshot {
  tick: number;
  sites: SiteRecord[];
  health: HealthRecord[];
  usage: UsageRecord[];
  backups: Record<number, BackupRecord[]>;
  jobs: JobRecord[];
  /** Seeded resource-family states (keyed `family` or `family@site`) and pending timers. */
  resources: { states: Record<string, unknown>; timers: unknown[] };
}
