import type { ServerContext } from '../context.js';
import type { Route } from '../http.js';

/** Routes of the feed module (to be filled in). */
export function feedRoutes(_ctx: ServerContext): Route[] {
  return [];
}
