-- Daily status seconds (docs/history.md, Rollups; store/rollups.py). All times are epoch
-- seconds.
--
-- One row per monitor and UTC day (`day`: the day's first second): the up, down and
-- paused seconds of the closed status periods in that day, always the sum of the day's
-- rows of `check_rollups`. Every statement that adds seconds to `check_rollups` adds the
-- same seconds here (the check batch, a pause, a resume), so a status page reads one row
-- per day instead of 24 (docs/status-pages.md, Built for the stampede).
CREATE TABLE daily_rollups (
    day            bigint NOT NULL,
    up_seconds     integer NOT NULL DEFAULT 0,
    down_seconds   integer NOT NULL DEFAULT 0,
    paused_seconds integer NOT NULL DEFAULT 0,
    monitor_id     text NOT NULL,
    PRIMARY KEY (monitor_id, day)
);

-- The hourly rollups written before this migration, summed once.
INSERT INTO daily_rollups (monitor_id, day, up_seconds, down_seconds, paused_seconds)
SELECT monitor_id, hour - hour % 86400, sum(up_seconds)::integer,
       sum(down_seconds)::integer, sum(paused_seconds)::integer
FROM check_rollups GROUP BY 1, 2;
