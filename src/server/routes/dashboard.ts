import type { ServerContext } from '../context.js';
import type { Route } from '../http.js';

/** Routes of the dashboard module (to be filled in). */
export function dashboardRoutes(_ctx: ServerContext): Route[] {
  return [];
}
