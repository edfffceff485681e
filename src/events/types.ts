import type { Change } from '../diff/types.js';

export type Severity = 'info' | 'warning' | 'critical';
export type AlertStatus = 'firing' | 'resolved';

/** The `data` of every hostwatch event (PRODUCT.md, "Events"). */
export interface EventData {
  name: string;
  severity: Severity;
  /** Present for condition alerts only. */
  status?: AlertStatus;
  summary: string;
  site_id: number | null;
  domain: string | null;
  changes: Change[];
  rule: string;
  observed_at: string;
  [extra: string]: unknown;
}

/** A CloudEvents 1.0 event in structured JSON mode, exactly as delivered and logged. */
export interface HostwatchEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  data: EventData;
}
