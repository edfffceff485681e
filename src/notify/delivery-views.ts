import type { ChannelConfig } from '../config/types.js';
import type { HeldView } from '../store/delivery-repo.js';
import type { DeliveryView, EventsRepo } from '../store/events-repo.js';

/**
 * What the delivery commands and `GET /api/deliveries` share: how a row and a held event
 * look as JSON, and which channel names a filter may take.
 */

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

/**
 * Why `name` is no channel to filter deliveries by (null: it is one): a channel must be in the
 * config, or have rows in the outbox (a channel removed since keeps its history). A mistyped
 * name is then an error that lists the channels, not an empty answer.
 */
export async function unknownChannel(channels: readonly Pick<ChannelConfig, 'name'>[], events: Pick<EventsRepo, 'deliveries'>, name: string): Promise<string | null> {
  if (channels.some((c) => c.name === name)) return null;
  if ((await events.deliveries({ failed: false, channel: name }, 1)).length > 0) return null;
  const names = channels.map((c) => c.name);
  const shown = JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);
  return `no channel named ${shown} in the config or the outbox (${names.length > 0 ? `its channels: ${names.join(', ')}` : 'it has no channels'})`;
}
