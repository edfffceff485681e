import type { ServerResponse } from 'node:http';
import { dashboardPage, FAVICON_SVG } from '../dashboard/page.js';
import type { ServerContext } from '../context.js';
import type { Route } from '../http.js';

/**
 * The dashboard at `/` and `/dashboard`: one static page, no build step, nothing from
 * another origin. The page itself is public because it holds no data (a browser cannot
 * send a bearer token when it opens a URL); the script sends the token on every API call.
 */
export function dashboardRoutes(_ctx: ServerContext): Route[] {
  const page = dashboardPage();
  const serve = (_req: unknown, res: ServerResponse): void => {
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': page.csp,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
    });
    res.end(page.html);
  };
  return [
    { method: 'GET', path: '/', public: true, handler: serve },
    { method: 'GET', path: '/dashboard', public: true, handler: serve },
    {
      method: 'GET',
      path: '/favicon.svg',
      public: true,
      handler: (_req, res) => {
        res.writeHead(200, { 'content-type': 'image/svg+xml', 'cache-control': 'max-age=86400', 'x-content-type-options': 'nosniff' });
        res.end(FAVICON_SVG);
      },
    },
  ];
}
