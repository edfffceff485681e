import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';

/** What the health endpoints ask of the rest of the program. */
export interface HealthProbe {
  /** The database answers and its migrations are applied. */
  databaseReady(): boolean;
  /** The scheduler is running (not stopped, not stopping). */
  schedulerRunning(): boolean;
}

/** Raised when the server must not start (for example a public bind without a token). */
export class ServerConfigError extends Error {
  override readonly name = 'ServerConfigError';
  readonly code = 'server_config';
}

/** Split `host:port` (IPv6 in brackets) into its parts. */
export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(listen);
  if (!m) throw new ServerConfigError(`server.listen: expected host:port (got "${listen}")`);
  return { host: (m[1] ?? m[2])!, port: Number(m[3]) };
}

/** Loopback names and addresses: the only binds allowed without a token. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/**
 * The operator HTTP server: `/livez` (the process answers) and `/readyz` (database open,
 * migrations applied, scheduler running; 503 otherwise). Binding beyond loopback needs a
 * token (`server.token`), so a daemon is never exposed by accident.
 */
export async function startServer(
  listen: string,
  token: string | null,
  probe: HealthProbe,
): Promise<{ server: Server; url: string; close: () => Promise<void> }> {
  const { host, port } = parseListen(listen);
  if (!isLoopback(host) && !token) {
    throw new ServerConfigError(
      `server.listen: ${listen} is reachable from other machines; set server.token (a bearer token) or listen on 127.0.0.1`,
    );
  }
  const server = createServer((req, res) => handle(req, res, probe));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const realPort = typeof addr === 'object' && addr ? addr.port : port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    server,
    url: `http://${shown}:${realPort}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function handle(req: IncomingMessage, res: ServerResponse, probe: HealthProbe): void {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'method not allowed' });
  if (path === '/livez') return json(res, 200, { status: 'ok' });
  if (path === '/readyz') {
    let database = false;
    try {
      database = probe.databaseReady();
    } catch {
      database = false;
    }
    const scheduler = probe.schedulerRunning();
    const ready = database && scheduler;
    return json(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not ready', database, scheduler });
  }
  json(res, 404, { error: 'not found' });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
}
