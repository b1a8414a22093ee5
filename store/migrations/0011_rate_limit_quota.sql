-- Rate limits across nodes by quota leasing (README, "Several nodes": rate limits across
-- nodes; extensions part 6: "rate limits hold for the whole service").
--
-- The counts each node synced every 0.5 s (0010) let every node admit, past a limit,
-- what the others had admitted in the last second or so; they are gone. A node now
-- leases a part of what is left of a window from this table, in one statement, and
-- admits from its lease without asking until the lease runs out (web/quota.py).
DROP TABLE rate_limit_counts;

-- One row per (limit window, key): what is charged to each slice of the window that
-- still counts (a window is 60 slices; a request of slice s counts until the end of
-- slice s + 60). `slices` (ascending) and `counts` are parallel arrays: slice numbers
-- (floor(epoch seconds / slice seconds), by the nodes' clocks) and what is charged
-- there: leased to nodes (a lease lasts until its slice ends; its unused part is given
-- back then), or admitted by a node deciding alone. `expires_at`: epoch seconds when
-- the newest slice stops counting (the row may then be deleted). UNLOGGED: a crash of
-- the server loses the windows' counts, as a restart of a lone node always did.
CREATE UNLOGGED TABLE rate_limit_quota (
    limit_name text NOT NULL,
    key        text NOT NULL,
    slices     bigint[] NOT NULL,
    counts     integer[] NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (limit_name, key)
);
CREATE INDEX rate_limit_quota_expires_at ON rate_limit_quota (expires_at);

-- `slices` and `counts` with `amount` added to slice `at` (negative: taken away), the
-- slices older than `oldest` and those left with nothing dropped; ascending.
CREATE FUNCTION rate_limit_slices_add(
    INOUT slices bigint[], INOUT counts integer[], at bigint, amount integer, oldest bigint
) LANGUAGE sql IMMUTABLE AS $fn$
    SELECT coalesce(array_agg(s ORDER BY s), '{}'), coalesce(array_agg(n ORDER BY s), '{}')
    FROM (SELECT s, sum(n)::integer AS n
          FROM (SELECT * FROM unnest(slices, counts) AS u(s, n) UNION ALL SELECT at, amount) a
          WHERE s >= oldest GROUP BY s) b
    WHERE n > 0
$fn$;

-- One exchange of a node with the table (store/rate_limits.py, take_quota). Item i is
-- the window `names[i]` of key `keys[i]` (`limits[i]` requests over 60 slices of
-- `slice_seconds[i]` seconds, now at slice `now_slices[i]`): first `charges[i]` is added
-- to slice `charge_slices[i]` (a node's debt, or, negative, a lease's unused part given
-- back), then, when `leases[i]`, a lease is taken at the current slice:
-- least(greatest(room / (2 * live nodes), needs[i], 1), room), room being what the limit
-- leaves and `needs[i]` the requests waiting for it on the node.
-- Items are handled in (name, key) order, each under its row's lock, so two nodes'
-- exchanges never wait on each other in a cycle. Returns per item (`item`: its 1-based
-- index) what was granted, what the window counts then, its oldest slice (NULL: none),
-- the slice whose end leaves room for one more (NULL: there is room), and the live
-- nodes (as the lease actor counts them: store/leases.py).
CREATE FUNCTION take_rate_limit_quota(
    names text[], keys text[], limits integer[], now_slices bigint[],
    slice_seconds double precision[], leases boolean[], needs integer[],
    charge_slices bigint[], charges integer[]
) RETURNS TABLE (
    item integer, granted integer, counted integer, oldest_slice bigint,
    retry_slice bigint, live_nodes integer
) LANGUAGE plpgsql AS $fn$
DECLARE
    s bigint[];
    c integer[];
    room integer;
    excess integer;
    j integer;
BEGIN
    SELECT greatest(count(*), 1)::integer INTO live_nodes FROM nodes n
    WHERE NOT n.stopping AND n.renewed_at + make_interval(secs => n.lease_seconds) > now();
    FOR item IN SELECT o FROM generate_subscripts(names, 1) AS o
                ORDER BY names[o] COLLATE "C", keys[o] COLLATE "C", o LOOP
        SELECT q.slices, q.counts INTO s, c FROM rate_limit_quota q
        WHERE q.limit_name = names[item] AND q.key = keys[item] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO rate_limit_quota VALUES (names[item], keys[item], '{}', '{}', 0)
            ON CONFLICT DO NOTHING;
            SELECT q.slices, q.counts INTO s, c FROM rate_limit_quota q
            WHERE q.limit_name = names[item] AND q.key = keys[item] FOR UPDATE;
        END IF;
        SELECT * INTO s, c FROM rate_limit_slices_add(
            s, c, charge_slices[item], charges[item], now_slices[item] - 60);
        counted := coalesce((SELECT sum(n) FROM unnest(c) AS n), 0);
        granted := 0;
        IF leases[item] AND counted < limits[item] THEN
            room := limits[item] - counted;
            granted := least(greatest(room / (2 * live_nodes), needs[item], 1), room);
            SELECT * INTO s, c FROM rate_limit_slices_add(
                s, c, now_slices[item], granted, now_slices[item] - 60);
            counted := counted + granted;
        END IF;
        UPDATE rate_limit_quota q SET slices = s, counts = c,
            expires_at = coalesce((s[array_upper(s, 1)] + 61) * slice_seconds[item], 0)
        WHERE q.limit_name = names[item] AND q.key = keys[item];
        oldest_slice := s[1];
        retry_slice := NULL;
        IF counted >= limits[item] THEN
            excess := counted - limits[item] + 1;
            FOR j IN 1 .. coalesce(array_length(s, 1), 0) LOOP
                excess := excess - c[j];
                IF excess <= 0 THEN
                    retry_slice := s[j];
                    EXIT;
                END IF;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$fn$;
