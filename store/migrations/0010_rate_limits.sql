-- Rate limits across nodes (extensions part 6: "rate limits hold for the whole service";
-- issue 14, item 4). Each node decides alone from memory and, every ~0.5 s, upserts its
-- own count of each (limit window, key, slice) it counted in, and reads the other nodes'
-- counts back (store/rate_limits.py). `expires_at`: epoch seconds (the writing node's
-- wall clock) when the slice stops counting; expired rows are deleted by the syncs.
-- UNLOGGED: counts live a minute or an hour and a crash may lose them (as a restart of a
-- node forgets its own), so they skip the write-ahead log.
CREATE UNLOGGED TABLE rate_limit_counts (
    limit_name text NOT NULL,
    key        text NOT NULL,
    slice      bigint NOT NULL,
    node       text NOT NULL,
    count      integer NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (limit_name, key, slice, node)
);
CREATE INDEX rate_limit_counts_expires_at ON rate_limit_counts (expires_at);
