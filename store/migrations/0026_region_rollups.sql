-- Per-region rollups (docs/regions.md, "History"; store/checks.py). All times are epoch
-- seconds.
--
-- One row per monitor with regions, region and hour (`hour`: the hour's first second):
-- that region's checks, failed checks, response-time sum and histogram (sparse, as
-- `check_rollups`), and its newest check. A region's seconds are not rolled up: its log
-- of view moves (`region_moves`) gives them exactly. The monitor's own row in
-- `check_rollups` keeps every region's checks and the quorum status's seconds.
CREATE TABLE region_rollups (
    hour                 bigint NOT NULL,
    response_time_sum_ms double precision NOT NULL DEFAULT 0,
    checks               integer NOT NULL DEFAULT 0,
    failed_checks        integer NOT NULL DEFAULT 0,
    last_check           bigint,
    monitor_id           text NOT NULL,
    region               text NOT NULL,
    histogram            integer[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (monitor_id, region, hour)
) WITH (fillfactor = 70);  -- room on the page for HOT updates: a row is updated per check

-- The checks stored before this migration, rolled up once.
INSERT INTO region_rollups (monitor_id, region, hour, checks, failed_checks,
    response_time_sum_ms, histogram, last_check)
SELECT monitor_id, region, hour, sum(n)::int, sum(failed)::int, sum(total),
    coalesce(array_agg(bucket * 65536 + least(n, 65535)::int ORDER BY bucket)
        FILTER (WHERE bucket IS NOT NULL), '{}'), max(last)
FROM (SELECT c.monitor_id, c.region, c.created - c.created % 3600 AS hour,
        histogram_bucket(c.response_time_ms) AS bucket, count(*) AS n,
        count(*) FILTER (WHERE c.status = 'down') AS failed,
        sum(c.response_time_ms) AS total, max(c.created) AS last
    FROM checks c JOIN monitors m ON m.id = c.monitor_id AND c.region = ANY(m.regions)
    GROUP BY 1, 2, 3, 4) AS x
GROUP BY monitor_id, region, hour;
