import { isCelError } from '@bufbuild/cel';
import { celInt, compileCel, unknownVariables, type CelProgram } from './cel.js';
import type { SiteLabelConfig } from './config/types.js';
import { isRecord } from './is-record.js';

/**
 * Site labels (config `site_labels`, docs/configuration.md): key/values given to a site by
 * a CEL match over its record, or fed by the API (client reports name the domains of each
 * client). They land in `data.labels` of every event about the site, where routes,
 * silences, maintenance windows, inhibition and `group_by` read them. Pure.
 */

/** What a `site_labels` match sees. */
export const SITE_LABEL_VARIABLES: readonly string[] = ['id', 'domain', 'site', 'clients'];

/** A site as a `site_labels` match sees it (labelsOf's bindings), to learn what a match gives. */
export const SAMPLE_SITE_BINDINGS: Readonly<Record<string, unknown>> = {
  id: 1n,
  domain: 'example.com',
  site: { id: 1, domain: 'example.com' },
  clients: [],
};

/** The names of a site_labels match's unknown variables ([] when all are known); throws on a syntax error. */
export function unknownSiteLabelVariables(match: string): string[] {
  return unknownVariables(match, SITE_LABEL_VARIABLES);
}

type Compiled = { test: CelProgram | null; labels: Record<string, string> } | { from: 'client_reports'; label: string };

/** Normalize a domain for comparing the site list with client reports (case, a leading www.). */
function norm(domain: string): string {
  return domain.trim().toLowerCase().replace(/^www\./, '');
}

/** Client names by domain, from the records of `GET /client-reports/clients` (`{name, domains}`). */
export function clientsByDomain(records: readonly unknown[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const c of records) {
    if (!isRecord(c) || typeof c['name'] !== 'string' || !Array.isArray(c['domains'])) continue;
    for (const d of c['domains']) {
      if (typeof d !== 'string') continue;
      const list = out.get(norm(d)) ?? [];
      if (!list.includes(c['name'])) list.push(c['name']);
      out.set(norm(d), list);
    }
  }
  for (const list of out.values()) list.sort();
  return out;
}

/** Compiled `site_labels`: the labels of a site from its record and its report clients. */
export class SiteLabeler {
  private readonly rules: Compiled[];

  constructor(config: readonly SiteLabelConfig[]) {
    // The config was checked (parse.ts): a match here compiles.
    this.rules = config.map((c) => ('from' in c ? { from: c.from, label: c.label } : { test: c.match ? compileCel(c.match) : null, labels: c.labels }));
  }

  /** True when no entry is configured (every site has no labels). */
  get empty(): boolean {
    return this.rules.length === 0;
  }

  /** Whether any entry reads client reports (so their list must be kept). */
  get usesClients(): boolean {
    return this.rules.some((r) => 'from' in r);
  }

  /**
   * The labels of one site: entries in order, a later entry's value winning over an earlier
   * one's. A match that errors (a field the record lacks) gives no labels, as in routes.
   */
  labelsOf(site: Record<string, unknown>, domain: string, clients: readonly string[]): Record<string, string> {
    const out: Record<string, string> = {};
    if (this.rules.length === 0) return out;
    // The id as a CEL int (a JSON number would be a double, and `id % 50` an error: no labels).
    const bindings = { id: celInt(site['id']) as never, domain, site: site as never, clients: clients as never };
    for (const r of this.rules) {
      if ('from' in r) {
        if (clients.length > 0) out[r.label] = clients.join(', ');
        continue;
      }
      if (r.test !== null) {
        const v = r.test(bindings);
        if (isCelError(v) || v !== true) continue;
      }
      Object.assign(out, r.labels);
    }
    return out;
  }

  /** The report clients of a domain from a clientsByDomain map. */
  static clientsOf(byDomain: ReadonlyMap<string, string[]>, domain: string): string[] {
    return byDomain.get(norm(domain)) ?? [];
  }
}
