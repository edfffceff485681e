-- hostwatch schema v7: the inhibitions in force for a site, found through an index.
-- Every event of a site that an inhibition could hold reads them (the notifier's dispatch);
-- the primary key (source, site_id) cannot serve a lookup by site alone, so each read
-- scanned every inhibited site: in an outage of N sites, N rows per event.
CREATE INDEX inhibitions_by_site ON inhibitions (site_id);
