import { json, type Route } from '../http.js';

/** What the health endpoints ask of the rest of the program. */
export interface HealthProbe {
  /** The database answers and its migrations are applied. */
  databaseReady(): Promise<boolean>;
  /** The scheduler is running (not stopped, not stopping). */
  schedulerRunning(): boolean;
}

/** `/livez` (the process answers) and `/readyz` (database, migrations, scheduler; 503 otherwise). */
export function healthRoutes(probe: HealthProbe): Route[] {
  return [
    { method: 'GET', path: '/livez', public: true, handler: (_req, res) => json(res, 200, { status: 'ok' }) },
    {
      method: 'GET',
      path: '/readyz',
      public: true,
      handler: async (_req, res) => {
        let database = false;
        try {
          database = await probe.databaseReady();
        } catch {
          database = false;
        }
        const scheduler = probe.schedulerRunning();
        const ready = database && scheduler;
        json(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not ready', database, scheduler });
      },
    },
  ];
}
