import type { Logger } from 'pino';
import { alertEventId, alertId, envelope } from '../events/envelope.js';
import { OPERATOR_EVENTS } from '../events/operator.js';
import type { HostwatchEvent } from '../events/types.js';
import { INCIDENT_RULE } from '../notify/incidents.js';
import { WATCHDOG_RULE } from '../selfwatch/watchdog.js';
import type { Notifier } from '../notify/notifier.js';
import type { CompiledRule } from '../rules/types.js';
import type { AlertRow, OpenAlert } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import { repos } from '../store/repos.js';

/**
 * Alerts of rules that are gone (docs/rules.md, "Removing or disabling a rule"): a rule
 * removed from the config or turned off with `enabled: false` is never evaluated again, so
 * what it had firing would fire forever (and an inhibition it started would hold its site
 * forever). At start they are resolved, as Alertmanager resolves the alerts of a rule that
 * went away.
 */

/** Why an alert's rule no longer runs: removed from the config, or `enabled: false`; null while it runs (or is hostwatch's own). */
export function retiredBecause(rule: string, rules: readonly CompiledRule[]): 'removed' | 'disabled' | null {
  // Operator alerts, platform incidents and the watchdog are not defined in rule files.
  if (rule in OPERATOR_EVENTS || rule === INCIDENT_RULE || rule === WATCHDOG_RULE) return null;
  const def = rules.find((r) => r.name === rule);
  if (def === undefined) return 'removed';
  return def.enabled ? null : 'disabled';
}

/**
 * The end of an open alert whose rule is retired: its row, resolved (a `for` wait is
 * dropped), and for a firing alert its `resolved` event, built from its last firing (same
 * `alert_id`, so a pager closes what it opened; its site, labels and severity). Pure.
 */
export function retiredAlertEnd(
  alert: OpenAlert,
  why: 'removed' | 'disabled',
  def: CompiledRule | undefined,
  o: { instance: string; now: number },
): { row: AlertRow; event: HostwatchEvent | null } {
  const { body, ...row } = alert;
  if (row.status !== 'firing') return { row: { ...row, pending_since: null, clear_since: null }, event: null };
  const id = alertEventId(row.rule, row.subject, row.seq, 'resolved');
  const at = new Date(o.now);
  const reason = why === 'removed' ? `rule ${row.rule} was removed` : `rule ${row.rule} is disabled`;
  const fired = body === null ? null : (JSON.parse(body) as HostwatchEvent).data;
  // What the firing said, without what belonged to it alone (a re-send's count, its changes, its longer text).
  const { repeat: _repeat, description: _description, ...kept } = fired ?? {
    name: def?.event ?? row.rule,
    severity: def?.severity ?? 'warning',
    summary: `${row.rule} on ${row.subject}`,
    site_id: row.site_id,
    domain: null,
    changes: [],
    rule: row.rule,
    observed_at: at.toISOString(),
  };
  const event = envelope({
    id,
    instance: o.instance,
    subject: row.subject,
    time: at,
    data: { ...kept, status: 'resolved', summary: `${kept.summary} (resolved: ${reason})`, changes: [], alert_id: alertId(row.rule, row.subject, row.seq), observed_at: at.toISOString() },
  });
  return { row: { ...row, status: 'resolved', since: o.now, pending_since: null, clear_since: null, last_event_id: id }, event };
}

/** What resolveRetiredAlerts needs. */
export interface RetiredDeps {
  store: Store;
  /** Every loaded rule, enabled or not. */
  rules: readonly CompiledRule[];
  notifier: Pick<Notifier, 'publishIn'>;
  instance: string;
  now: () => number;
  log: Logger;
}

/**
 * Resolve every alert firing or pending for a rule that is removed or disabled, in one
 * transaction: each firing one's `resolved` event is stored and dispatched (which ends an
 * inhibition it started and re-decides what that held), and its row is resolved. Idempotent:
 * a second start finds nothing open; of two cluster members doing it at once, the second
 * finds each resolution stored already (its id is deterministic) and leaves the row to the
 * first. Returns the events it stored, to announce after the commit.
 */
export async function resolveRetiredAlerts(d: RetiredDeps): Promise<HostwatchEvent[]> {
  const now = d.now();
  const stored = await d.store.transaction(async (tx) => {
    const r = repos(tx);
    const out: HostwatchEvent[] = [];
    for (const alert of await r.alerts.open()) {
      const why = retiredBecause(alert.rule, d.rules);
      if (why === null) continue;
      const end = retiredAlertEnd(alert, why, d.rules.find((x) => x.name === alert.rule), { instance: d.instance, now });
      if (end.event !== null) {
        // Stored already: another member of the cluster resolved it in the meantime.
        if (!(await d.notifier.publishIn(r, end.event))) continue;
        out.push(end.event);
      }
      await r.alerts.put(end.row);
    }
    return out;
  });
  if (stored.length > 0) d.log.info({ alerts: stored.map((e) => `${e.data.rule} ${e.subject}`) }, 'alerts of removed or disabled rules resolved');
  return stored;
}
