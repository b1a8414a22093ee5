-- Regions and quorum (docs/regions.md; store/quorum.py). All times are epoch seconds.
--
-- `monitors.regions`: the regions that probe the monitor (1 to 10 names, or NULL: probed
-- by one node of any region, as before); `region_quorum`: how many of them must see it
-- down for the monitor to be down (1 to the number of regions; NULL without regions).
ALTER TABLE monitors ADD COLUMN regions text[];
ALTER TABLE monitors ADD COLUMN region_quorum smallint;

-- Every check records the region of the node that made it (NULL: written before this
-- migration).
ALTER TABLE checks ADD COLUMN region text;

-- Each listed region's own view of a monitor with regions, moved by the monitor's
-- failure and recovery thresholds in that region: `status` (`pending`, `up`, `down`)
-- since `since`, `heard` the newest check of that region (NULL: none yet). A view not
-- heard for more than two intervals and 10 s counts `unknown` (store/quorum.py). The
-- rows follow `monitors.regions` (made and dropped with it).
CREATE TABLE monitor_regions (
    monitor_id text NOT NULL,
    region     text NOT NULL,
    status     text NOT NULL DEFAULT 'pending',
    since      bigint NOT NULL,
    heard      bigint,
    PRIMARY KEY (monitor_id, region)
);

-- The region moves: each move of a region's view, by the check that caused it (written
-- once: a retried batch logs nothing twice), or with no check by a pause (to `paused`)
-- or a resume (to `pending`) of the monitor. Per-region availability reads them.
CREATE TABLE region_moves (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    monitor_id  text NOT NULL,
    region      text NOT NULL,
    check_id    text UNIQUE,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    created     bigint NOT NULL
);
CREATE INDEX region_moves_by_monitor ON region_moves (monitor_id, region, created);
