import { json, type Route } from '../http.js';

/** What the health endpoints ask of the rest of the program. */
export interface HealthProbe {
  /** The database answers, its migrations are applied and its writes go through. */
  databaseReady(): Promise<boolean>;
  /** Why the database fails, when it does (writes refused, a damaged file): shown by /readyz. */
  databaseProblem?(): string | null;
  /** The scheduler is running (not stopped, not stopping). */
  schedulerRunning(): boolean;
  /**
   * When a poll last succeeded (the start time until one does), and whether that is recent
   * enough (`server.not_ready_after`): a daemon whose every poll fails is not ready.
   */
  polling?(): { fresh: boolean; lastSuccessAt: number };
  /**
   * In a cluster (PostgreSQL): whether this instance is a live member (its lease renewed in
   * time), its name and member id, and whether it owns the timers.
   */
  cluster?(): { member: boolean; instance: string; memberId: string; timers: boolean };
}

/** How long /readyz waits for the database's answer before it says not ready. */
export const READY_DATABASE_TIMEOUT_MS = 2_000;

/**
 * `/livez` (the process answers) and `/readyz` (database, migrations, writes going
 * through, scheduler, a recent successful poll, and in a cluster a live membership; 503
 * otherwise, with the database's problem).
 */
export function healthRoutes(probe: HealthProbe): Route[] {
  return [
    { method: 'GET', path: '/livez', public: true, anyHost: true, handler: (_req, res) => json(res, 200, { status: 'ok' }) },
    {
      method: 'GET',
      path: '/readyz',
      public: true,
      anyHost: true,
      handler: async (_req, res) => {
        let database = false;
        let slow = false;
        let timer: NodeJS.Timeout | undefined;
        try {
          // A database that does not answer (a frozen server, a network partition) must not
          // hold the probe past a health check's timeout (Docker's is 5 s): it is not ready.
          const late = new Promise<boolean>((resolve) => {
            timer = setTimeout(() => {
              slow = true;
              resolve(false);
            }, READY_DATABASE_TIMEOUT_MS);
          });
          database = await Promise.race([probe.databaseReady(), late]);
        } catch {
          database = false;
        } finally {
          clearTimeout(timer);
        }
        const scheduler = probe.schedulerRunning();
        const polling = probe.polling?.() ?? null;
        const cluster = probe.cluster?.() ?? null;
        const problem = database ? null : (probe.databaseProblem?.() ?? (slow ? `the database did not answer within ${READY_DATABASE_TIMEOUT_MS / 1000} s` : null));
        const ready = database && scheduler && (polling?.fresh ?? true) && (cluster?.member ?? true);
        json(res, ready ? 200 : 503, {
          status: ready ? 'ready' : 'not ready',
          database,
          ...(problem ? { database_problem: problem } : {}),
          scheduler,
          ...(polling ? { polling: polling.fresh, last_poll_success_at: new Date(polling.lastSuccessAt).toISOString() } : {}),
          ...(cluster ? { cluster: { member: cluster.member, instance: cluster.instance, member_id: cluster.memberId, timers: cluster.timers } } : {}),
        });
      },
    },
  ];
}
