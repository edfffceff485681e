import { clientsByDomain, SiteLabeler } from '../labels.js';
import { reportClientsSource } from '../sources/families/visibility.js';
import { entityOf, sitesSource } from '../sources/registry.js';
import type { SiteInfo } from '../sources/types.js';
import type { SnapshotsRepo } from '../store/snapshots-repo.js';
import { listOf, siteInfoFromRecord } from './plan.js';

/**
 * The sites known from the last site list, each with its labels (config `site_labels`).
 * Labels are worked out when the site list or the client reports' client list changes,
 * never per event, so an event costs a map lookup.
 */
export class SiteDirectory {
  private records: Record<string, unknown>[] = [];
  private byDomain: ReadonlyMap<string, string[]> = new Map();
  private sites = new Map<number, SiteInfo>();

  constructor(private readonly labeler: SiteLabeler = new SiteLabeler([])) {}

  /** Take a new site list (the `sites` snapshot value). */
  setSites(value: unknown): void {
    this.records = listOf(sitesSource, value).filter((r) => typeof r['id'] === 'number');
    this.rebuild();
  }

  /** Take a new client list (`GET /client-reports/clients`); only kept when a label reads it. */
  setClients(value: unknown): void {
    if (!this.labeler.usesClients) return;
    this.byDomain = clientsByDomain(Array.isArray(value) ? value : []);
    this.rebuild();
  }

  /** Take what a store holds: its client list (read only when a label uses it) and its site list. */
  async load(snapshots: Pick<SnapshotsRepo, 'get'>): Promise<void> {
    if (this.labeler.usesClients) {
      const clients = await snapshots.get(reportClientsSource.name, entityOf(reportClientsSource, null).entity);
      if (clients) this.setClients(JSON.parse(clients.body));
    }
    const row = await snapshots.get(sitesSource.name, sitesSource.name);
    if (row) this.setSites(JSON.parse(row.body));
  }

  /** One site, or undefined. */
  get(id: number): SiteInfo | undefined {
    return this.sites.get(id);
  }

  /** Every known site id. */
  ids(): IterableIterator<number> {
    return this.sites.keys();
  }

  /** How many sites are known. */
  get size(): number {
    return this.sites.size;
  }

  /** Every site in id order. */
  all(): SiteInfo[] {
    return [...this.sites.values()].sort((a, b) => a.id - b.id);
  }

  private rebuild(): void {
    const next = new Map<number, SiteInfo>();
    for (const rec of this.records) {
      const info = siteInfoFromRecord(rec);
      if (!this.labeler.empty) {
        const labels = this.labeler.labelsOf(rec, info.domain, SiteLabeler.clientsOf(this.byDomain, info.domain));
        if (Object.keys(labels).length > 0) info.labels = labels;
      }
      next.set(info.id, info);
    }
    this.sites = next;
  }
}
