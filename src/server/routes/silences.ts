import { randomUUID } from 'node:crypto';
import { parseSilenceRequest, silenceState, silenceView, sortSilences, type Silence, type SilenceState } from '../../notify/silences.js';
import { repos } from '../../store/repos.js';
import type { ServerContext } from '../context.js';
import { HttpError, json, onlyParams, readJson, type Route } from '../http.js';

/** How far back the list shows silences that are over. */
export const RECENTLY_EXPIRED_MS = 7 * 86_400_000;

const STATES: readonly SilenceState[] = ['active', 'pending', 'expired'];

/**
 * `GET /api/silences` (active, then pending, then those that ended in the last 7 days;
 * `?state=` keeps one state), `GET /api/silences/{id}`, `POST /api/silences` (create),
 * `POST /api/silences/{id}/expire`, and `GET /api/silenced-events` (which recent events
 * were held back, and by which silence: the feed carries events exactly as delivered, so
 * this is where the dashboard learns it). Ids are random: a silence is a person's action,
 * not something derived from data.
 */
export function silencesRoutes(ctx: ServerContext, opts: { newId?: () => string } = {}): Route[] {
  const repo = repos(ctx.store).silences;
  const newId = opts.newId ?? randomUUID;
  const view = async (s: Silence, now: number): Promise<ReturnType<typeof silenceView>> => silenceView(s, now, await repo.suppressed(s.id));
  const byId = async (id: string): Promise<Silence> => {
    const s = await repo.get(id);
    if (!s) throw new HttpError(404, 'not_found', `no silence with id "${id}"`);
    return s;
  };
  return [
    {
      method: 'GET',
      path: '/api/silences',
      handler: async (req, res) => {
        onlyParams(req.url.searchParams, '/api/silences', ['state']);
        const now = ctx.now();
        const state = req.url.searchParams.get('state');
        if (state !== null && !STATES.includes(state as SilenceState)) {
          throw new HttpError(400, 'bad_request', `state: one of ${STATES.join(', ')} (got "${state}")`);
        }
        const list = sortSilences(await repo.recent(now, now - RECENTLY_EXPIRED_MS), now).filter((s) => state === null || silenceState(s, now) === state);
        const data = [];
        for (const s of list) data.push(await view(s, now));
        json(res, 200, { data });
      },
    },
    {
      method: 'POST',
      path: '/api/silences',
      handler: async (req, res) => {
        const body = await readJson(req.raw);
        const now = ctx.now();
        const parsed = parseSilenceRequest(body, now, { createdBy: 'api', maxDurationMs: ctx.config.silences.max_duration_ms, eventNames: ctx.eventNames });
        if (!parsed.ok) throw new HttpError(400, 'bad_request', parsed.errors.map((e) => `${e.field}: ${e.message}`).join('; '));
        const silence: Silence = { id: newId(), ...parsed.silence };
        await ctx.store.transaction((tx) => repos(tx).silences.add(silence));
        ctx.log.info(
          { silence: silence.id, match: silence.match, ends_at: new Date(silence.ends_at).toISOString(), created_by: silence.created_by },
          'silence created',
        );
        json(res, 201, await view(silence, now), { location: `/api/silences/${silence.id}` });
      },
    },
    {
      method: 'GET',
      path: '/api/silenced-events',
      handler: async (req, res) => {
        onlyParams(req.url.searchParams, '/api/silenced-events', ['limit']);
        const text = req.url.searchParams.get('limit');
        const limit = text === null || text === '' ? 200 : /^\d{1,4}$/.test(text) ? Number(text) : NaN;
        if (!(limit >= 1 && limit <= 1000)) throw new HttpError(400, 'bad_request', `limit: a whole number from 1 to 1000 (got "${text}")`);
        json(res, 200, { data: await repo.recentlySilenced(limit) });
      },
    },
    {
      method: 'GET',
      path: /^\/api\/silences\/([^/]+)$/,
      handler: async (req, res) => json(res, 200, await view(await byId(req.params[0]!), ctx.now())),
    },
    {
      method: 'POST',
      path: /^\/api\/silences\/([^/]+)\/expire$/,
      handler: async (req, res) => {
        const now = ctx.now();
        const s = await byId(req.params[0]!);
        // Expiring one that is already over changes nothing and is not an error.
        if (await ctx.store.transaction((tx) => repos(tx).silences.expire(s.id, now))) ctx.log.info({ silence: s.id }, 'silence expired');
        json(res, 200, await view((await repo.get(s.id))!, now));
      },
    },
  ];
}
