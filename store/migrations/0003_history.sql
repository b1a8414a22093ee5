-- History for months (extensions part 4): checks partitioned by time, hourly rollups
-- written with the checks, status periods, and the log of every status move.

-- 1. Checks, partitioned by `created` (epoch seconds). The maintenance actor
--    (store/maintenance.py) makes partitions ahead of time and drops expired ones whole.
--    The row is narrower than before: no `seq` (lists order by (created, id)), fixed-width
--    columns first (no alignment padding), and one index, the primary key, which serves
--    listing, the cursor (a check id carries its `created`, store/ids.py), and the
--    idempotent retry of a batch (ON CONFLICT DO NOTHING).
ALTER TABLE checks RENAME TO checks_unpartitioned;
ALTER INDEX checks_by_monitor RENAME TO checks_unpartitioned_by_monitor;
ALTER TABLE checks_unpartitioned RENAME CONSTRAINT checks_pkey TO checks_unpartitioned_pkey;
ALTER TABLE checks_unpartitioned RENAME CONSTRAINT checks_id_key TO checks_unpartitioned_id_key;

CREATE TABLE checks (
    created          bigint NOT NULL,
    response_time_ms double precision NOT NULL,
    status_code      integer,
    monitor_id       text NOT NULL,
    id               text NOT NULL,
    status           text NOT NULL CHECK (status IN ('up', 'down')),
    error_code       text,
    error_message    text,
    PRIMARY KEY (monitor_id, created, id)
) PARTITION BY RANGE (created);

-- Daily partitions for the checks already stored (named by their first second).
DO $$
DECLARE
    first_day bigint;
    last_day  bigint;
    day       bigint;
BEGIN
    SELECT min(created) - min(created) % 86400, max(created) - max(created) % 86400
      INTO first_day, last_day FROM checks_unpartitioned;
    IF first_day IS NOT NULL THEN
        day := first_day;
        WHILE day <= last_day LOOP
            EXECUTE format(
                'CREATE TABLE checks_p%s PARTITION OF checks FOR VALUES FROM (%s) TO (%s)',
                day, day, day + 86400);
            day := day + 86400;
        END LOOP;
    END IF;
END
$$;

-- 2. Hourly rollups: one row per monitor per hour (`hour`: the hour's first second).
--    `histogram` is sparse: bucket * 65536 + count, ascending by bucket (store/rollups.py
--    defines the buckets). The seconds are closed status periods (see monitors.status_since).
CREATE TABLE check_rollups (
    hour                 bigint NOT NULL,
    response_time_sum_ms double precision NOT NULL DEFAULT 0,
    checks               integer NOT NULL DEFAULT 0,
    failed_checks        integer NOT NULL DEFAULT 0,
    up_seconds           integer NOT NULL DEFAULT 0,
    down_seconds         integer NOT NULL DEFAULT 0,
    paused_seconds       integer NOT NULL DEFAULT 0,
    monitor_id           text NOT NULL,
    histogram            integer[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (monitor_id, hour)
) WITH (fillfactor = 70);  -- room on the page for HOT updates: a row is updated per check

CREATE FUNCTION histogram_merge(a integer[], b integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(array_agg(bucket * 65536 + n ORDER BY bucket), '{}')
    FROM (SELECT e / 65536 AS bucket, least(sum(e % 65536), 65535)::integer AS n
          FROM unnest(a || b) AS e GROUP BY 1) AS merged
$fn$;

CREATE FUNCTION histogram_bucket(ms double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT CASE WHEN ms < 0.001 THEN 0
                ELSE least(199, floor(ln(ms / 0.001) / ln(1.1))::integer + 1) END
$fn$;

-- The rollups of the checks already stored (their status seconds are unknown: the
-- status periods start now, below).
INSERT INTO check_rollups (monitor_id, hour, checks, failed_checks, response_time_sum_ms, histogram)
SELECT monitor_id, hour, sum(n)::integer, sum(failed)::integer, sum(total),
       array_agg(bucket * 65536 + least(n, 65535)::integer ORDER BY bucket)
FROM (SELECT monitor_id, created - created % 3600 AS hour,
             histogram_bucket(response_time_ms) AS bucket, count(*) AS n,
             count(*) FILTER (WHERE status = 'down') AS failed, sum(response_time_ms) AS total
      FROM checks_unpartitioned GROUP BY 1, 2, 3) AS b
GROUP BY monitor_id, hour;

INSERT INTO checks (created, response_time_ms, status_code, monitor_id, id, status,
                    error_code, error_message)
SELECT created, response_time_ms, status_code, monitor_id, id, status, error_code,
       error_message
FROM checks_unpartitioned;
DROP TABLE checks_unpartitioned;

-- 3. Status periods: the current status holds since `status_since` (epoch seconds; NULL:
--    since `created`). A move closes the period into the rollups in its own transaction.
ALTER TABLE monitors ADD COLUMN status_since bigint;
UPDATE monitors SET status_since = extract(epoch FROM now())::bigint;

-- 4. The log of status moves, pause and resume included (check_id NULL), read for the
--    edges of an availability range and for the longest down period.
DROP INDEX status_changes_by_monitor;  -- (monitor_id, seq DESC): ranges read by time now
CREATE INDEX status_changes_by_monitor ON status_changes (monitor_id, created);

-- 5. Partitions on demand: the partitions of `checks` covering [lo, hi] (epoch seconds),
--    `width` seconds each, aligned to multiples of `width`; a slot that any existing
--    partition overlaps is left as it is. Called by the maintenance actor ahead of time
--    and by the store actor for a batch outside the partitions it knows.
CREATE FUNCTION ensure_check_partitions(lo bigint, hi bigint, width bigint)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    slot bigint := lo - lo % width;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('uptrio.check_partitions'));
    WHILE slot <= hi LOOP
        IF NOT EXISTS (
            SELECT 1 FROM check_partition_bounds() AS b
            WHERE b.range_from < slot + width AND b.range_to > slot
        ) THEN
            EXECUTE format(
                'CREATE TABLE checks_p%s PARTITION OF checks FOR VALUES FROM (%s) TO (%s)',
                slot, slot, slot + width);
        END IF;
        slot := slot + width;
    END LOOP;
END
$fn$;

-- Every partition of `checks` with its bounds (epoch seconds, [range_from, range_to)).
CREATE FUNCTION check_partition_bounds()
RETURNS TABLE (name text, range_from bigint, range_to bigint)
LANGUAGE sql STABLE AS $fn$
    SELECT c.relname::text, m[1]::bigint, m[2]::bigint
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                    'FROM \(''?(-?\d+)''?\) TO \(''?(-?\d+)''?\)') AS m
    WHERE i.inhparent = 'checks'::regclass
$fn$;
