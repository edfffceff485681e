import type { ServerContext } from '../context.js';
import type { Route } from '../http.js';

/** Routes of the silences module (to be filled in). */
export function silencesRoutes(_ctx: ServerContext): Route[] {
  return [];
}
