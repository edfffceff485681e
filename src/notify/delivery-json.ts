import type { HeldView } from '../store/delivery-repo.js';
import type { DeliveryView } from '../store/events-repo.js';

/**
 * An outbox row as JSON, the same for `GET /api/deliveries` and `hostwatch deliveries --json`:
 * times in ISO 8601, and a next attempt only where one is pending (the column keeps a stale
 * value otherwise).
 */
export function deliveryJson(d: DeliveryView): Omit<DeliveryView, 'next_attempt_at' | 'updated_at'> & { next_attempt_at: string | null; updated_at: string } {
  return {
    ...d,
    next_attempt_at: d.state === 'pending' ? new Date(d.next_attempt_at).toISOString() : null,
    updated_at: new Date(d.updated_at).toISOString(),
  };
}

/** A held event as JSON (`hostwatch deliveries --held --json`): its time in ISO 8601. */
export function heldJson(h: HeldView): Omit<HeldView, 'time'> & { time: string } {
  return { ...h, time: new Date(h.time).toISOString() };
}
