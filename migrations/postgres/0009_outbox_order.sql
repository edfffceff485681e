-- hostwatch schema v9: the rows of one channel go out in the order they were queued for
-- each alert or subject (rule and subject, joined by the unit separator U+001F): a
-- resolution is not sent while the firing before it waits for a retry, so a pager never
-- gets a resolve for an incident it has not opened yet. NULL: no order (rows queued before v9
-- that were delivered or dead-lettered already; pending ones get their key here).
ALTER TABLE outbox ADD COLUMN order_key TEXT;
UPDATE outbox SET order_key = (SELECT e.rule || chr(31) || e.subject FROM events AS e WHERE e.id = outbox.event_id) WHERE state = 'pending';
CREATE INDEX outbox_pending_by_order ON outbox (channel, order_key, id) WHERE state = 'pending' AND order_key IS NOT NULL;
