import { Agent, EnvHttpProxyAgent, type Dispatcher } from 'undici';

/**
 * Outbound HTTP (the API, webhooks, chat and paging providers, the heartbeat) goes through
 * the proxy the environment names, as curl and most tools do: `HTTPS_PROXY` for https://
 * URLs, `HTTP_PROXY` for http:// ones (and for https:// when only it is set), and `NO_PROXY`
 * (host names, `.domain`, `*`) for hosts reached directly, and this machine's loopback always
 * (docs/configuration.md, "Behind a proxy"). Lower-case names are read too. Without any of
 * them every request goes direct.
 */
export function proxyFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].some((k) => (env[k] ?? '') !== '');
}

/**
 * The hosts reached directly: `NO_PROXY`, and always this machine (a proxy cannot reach its
 * loopback: the demo's simulator, a receiver on localhost).
 */
export function noProxy(env: NodeJS.ProcessEnv = process.env): string {
  const listed = (env['NO_PROXY'] ?? env['no_proxy'] ?? '').trim();
  if (listed === '*') return '*';
  return [listed, 'localhost', '127.0.0.1', '[::1]'].filter((h) => h !== '').join(',');
}

/** A connection pool for outbound requests: through the environment's proxy when it names one. */
export function outboundAgent(opts: Agent.Options): Dispatcher {
  return proxyFromEnv() ? new EnvHttpProxyAgent({ ...opts, noProxy: noProxy() }) : new Agent(opts);
}

let shared: Dispatcher | null = null;

/**
 * For requests made without a pool of their own (Slack's client, the heartbeat): one shared
 * pool through the environment's proxy when it names one; undefined (undici's default) otherwise.
 */
export function proxyDispatcher(): Dispatcher | undefined {
  if (!proxyFromEnv()) return undefined;
  shared ??= new EnvHttpProxyAgent({ noProxy: noProxy() });
  return shared;
}

/**
 * A proxy that refused to open the tunnel: undici says only "Proxy response (403) !== 200
 * when HTTP Tunneling" (UND_ERR_ABORTED). Said in words that name the proxy; null for any
 * other error.
 */
export function proxyRefusal(e: unknown): string | null {
  const m = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling/.exec(String((e as { message?: unknown } | null)?.message ?? ''));
  return m ? `the proxy refused the tunnel (it answered CONNECT with ${m[1]}; see HTTPS_PROXY / HTTP_PROXY and NO_PROXY)` : null;
}
