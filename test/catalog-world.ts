/**
 * Helpers for driving the simulator through its control interface (`/_sim`) in the
 * catalog and polling tests: the same levers a tool outside the process would use.
 */
import type { Simulator } from '../src/simulator/index.js';

type Json = Record<string, unknown>;

/** A thin client of `/_sim`: family state (GET/PATCH) and family actions (`do`). */
export class Control {
  constructor(private readonly sim: Simulator) {}

  /** Call a control endpoint; throws with the server's message on a non-2xx answer. */
  async call(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await fetch(`${this.sim.url}/_sim${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} /_sim${path}: HTTP ${res.status} ${text}`);
    return text === '' ? null : (JSON.parse(text) as Json)['data'];
  }

  /** A family's raw state (per site when `site` is given). */
  async state<T = Json>(family: string, site?: number): Promise<T> {
    return (await this.call('GET', `${site === undefined ? '' : `/sites/${site}`}/state/${family}`)) as T;
  }

  /** Set fields of a family's state by dotted path (arrays of records are walked by `id`). */
  async set(family: string, values: Json, site?: number): Promise<unknown> {
    return this.call('PATCH', `${site === undefined ? '' : `/sites/${site}`}/state/${family}`, { set: values });
  }

  /** Patch operations on a family's state. */
  async ops(family: string, ops: unknown[], site?: number): Promise<unknown> {
    return this.call('PATCH', `${site === undefined ? '' : `/sites/${site}`}/state/${family}`, { ops });
  }

  /** Run a family action (what drift and the API use) with `args`. */
  async act<T = Json>(family: string, action: string, args: Json = {}, site?: number): Promise<T> {
    return (await this.call('POST', `${site === undefined ? '' : `/sites/${site}`}/do/${family}/${action}`, args)) as T;
  }

  /** Put a site on the CDN provider and make it a CMS site (security and bot check apply). */
  async cdnCms(site: number): Promise<void> {
    await this.set('dns', { 'nameservers.dns_provider': 'cdn' }, site);
    await this.set('site', { app: 'cms' }, site);
  }

  /** A site's DNS off the CDN provider (security answers 409). */
  async offCdn(site: number): Promise<void> {
    await this.set('dns', { 'nameservers.dns_provider': 'registrar' }, site);
  }

  /** Set a site record's `state` (suspended, expired, live, …). */
  async siteState(site: number, state: string): Promise<void> {
    await this.call('POST', `/sites/${site}/state`, { state });
  }

  /** Set usage figures of a site (snake_case keys of the control interface). */
  async usage(site: number, change: Json): Promise<void> {
    await this.call('POST', `/sites/${site}/usage`, change);
  }

  /** The whole world (sites, health, usage, backups, jobs, family states). */
  async world<T = Json>(): Promise<T> {
    return (await this.call('GET', '/world')) as T;
  }

  /** Stop the world's random drift, so only what a test does changes anything. */
  async still(): Promise<void> {
    await this.call('POST', '/drift', { enabled: false });
  }
}
