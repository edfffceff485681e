import type { ServerContext } from '../context.js';
import type { Route } from '../http.js';

/** Routes of the api module (to be filled in). */
export function apiRoutes(_ctx: ServerContext): Route[] {
  return [];
}
