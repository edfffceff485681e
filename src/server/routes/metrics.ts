import type { Metrics } from '../../metrics.js';
import type { Route } from '../http.js';

/** `/metrics`: Prometheus text exposition. */
export function metricsRoutes(metrics: Metrics): Route[] {
  return [
    {
      method: 'GET',
      path: '/metrics',
      handler: async (_req, res) => {
        const text = await metrics.text();
        res.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'no-store' });
        res.end(text);
      },
    },
  ];
}
