-- Maintenance windows (docs/maintenance.md; store/windows.py, store/recurrence.py): a
-- window covers monitors and heartbeats, one-off (`starts_at`, `ends_at`) or recurring
-- (`recurrence`: {"rrule", "time_zone", "start", "duration_seconds"}, expanded in the
-- window's own time zone). All times are epoch seconds.
--
-- `ended_at`: when `POST .../end` last cut an open occurrence short; `canceled_at`: when
-- `POST .../cancel` dropped every later occurrence. `materialized_until`: occurrences
-- starting before it are rows of `maintenance_occurrences` (35 days ahead of the write
-- that made them, extended by the daily job).
CREATE TABLE maintenance_windows (
    seq                       bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                        text PRIMARY KEY,
    account_id                text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    title                     text NOT NULL,
    description               text,
    starts_at                 bigint,
    ends_at                   bigint,
    recurrence                jsonb,
    suppress_alerts           boolean NOT NULL DEFAULT true,
    exclude_from_availability boolean NOT NULL DEFAULT true,
    pause_checks              boolean NOT NULL DEFAULT false,
    ended_at                  bigint,
    canceled_at               bigint,
    materialized_until        bigint NOT NULL,
    created                   bigint NOT NULL,
    updated                   bigint NOT NULL,
    metadata                  jsonb NOT NULL DEFAULT '{}',
    CHECK ((recurrence IS NULL) = (starts_at IS NOT NULL AND ends_at IS NOT NULL)),
    CHECK (ends_at > starts_at)
);
CREATE INDEX maintenance_windows_by_created ON maintenance_windows (account_id, created, seq);
-- the daily job's claim: windows whose rows end too soon, oldest horizon first
CREATE INDEX maintenance_windows_by_horizon ON maintenance_windows (materialized_until)
    WHERE canceled_at IS NULL;

-- The monitors (mon_) and heartbeats (hbt_) a window covers, in the order given. No
-- foreign key on `resource_id` (it names either table): a deleted resource's rows are
-- never asked about again.
CREATE TABLE maintenance_window_resources (
    window_id   text NOT NULL REFERENCES maintenance_windows (id) ON DELETE CASCADE,
    resource_id text NOT NULL,
    position    integer NOT NULL,
    PRIMARY KEY (window_id, resource_id)
);
CREATE INDEX maintenance_window_resources_by_resource
    ON maintenance_window_resources (resource_id, window_id);

-- Each occurrence of a window as a row, `[starts_at, ends_at)`, as `end` and `cancel`
-- left it. "Is resource r in a window at t" reads r's windows by the index above, then
-- each window's first occurrence ending after t by `maintenance_occurrences_by_end`
-- (one row each). `start_handled` and `end_handled` are for the claim loop that acts
-- when an occurrence starts or ends (its events; the incidents held back until its
-- end): false until a node has done it, and the partial indexes find what is due.
CREATE TABLE maintenance_occurrences (
    window_id     text NOT NULL REFERENCES maintenance_windows (id) ON DELETE CASCADE,
    starts_at     bigint NOT NULL,
    ends_at       bigint NOT NULL CHECK (ends_at > starts_at),
    start_handled boolean NOT NULL DEFAULT false,
    end_handled   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (window_id, starts_at)
);
CREATE INDEX maintenance_occurrences_by_end
    ON maintenance_occurrences (window_id, ends_at, starts_at);
CREATE INDEX maintenance_occurrences_start_due ON maintenance_occurrences (starts_at)
    WHERE NOT start_handled;
CREATE INDEX maintenance_occurrences_end_due ON maintenance_occurrences (ends_at)
    WHERE NOT end_handled;
