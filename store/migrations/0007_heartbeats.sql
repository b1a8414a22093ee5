-- Heartbeats (extensions part 7): monitors of jobs that call us, and the pings they send.
-- (Version 0006 belongs to the assertions branch of the same issue; the migrator applies
-- whatever versions exist, in order, so a gap is fine.)

-- `ping_key` is the secret of the public ping URL (/ping/<key>): 128 random bits as 32
-- lowercase hex characters, unique over the service. `last_success_at` (epoch seconds)
-- is the latest success ping: the engine's deadline runs from it (period + grace), also
-- after a restart. `run_epoch` grows with every create, pause and resume, as for
-- monitors: a status the engine wrote for an older epoch is ignored.
CREATE TABLE heartbeats (
    seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                text PRIMARY KEY,
    account_id        text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name              text NOT NULL,
    period_seconds    integer NOT NULL CHECK (period_seconds BETWEEN 30 AND 2592000),
    grace_seconds     integer NOT NULL CHECK (grace_seconds BETWEEN 0 AND 86400),
    status            text NOT NULL CHECK (status IN ('pending', 'up', 'down', 'paused')),
    ping_key          text NOT NULL CONSTRAINT heartbeats_ping_key_key UNIQUE
                      CHECK (ping_key ~ '^[0-9a-f]{32}$'),
    last_ping_at      bigint,
    last_success_at   bigint,
    auto_incidents    boolean NOT NULL DEFAULT true,
    incident_severity text NOT NULL DEFAULT 'major'
                      CHECK (incident_severity IN ('critical', 'major', 'minor', 'maintenance')),
    run_epoch         integer NOT NULL DEFAULT 0,
    created           bigint NOT NULL,
    updated           bigint NOT NULL,
    metadata          jsonb NOT NULL DEFAULT '{}'
);
-- Keyset pagination (store/pagination.py): (account, sort key, seq).
CREATE INDEX heartbeats_by_created ON heartbeats (account_id, created, seq);
CREATE INDEX heartbeats_by_updated ON heartbeats (account_id, updated, seq);
CREATE INDEX heartbeats_by_name ON heartbeats (account_id, name, seq);

-- Pings, newest first per heartbeat. No foreign key, as for checks: the store actor's
-- batches insert only pings of heartbeats that still exist, and deleting a heartbeat
-- deletes its pings. Kept `ping_retention_days` (store/maintenance.py), deleted in bulk.
-- `duration_ms` (milliseconds) is set on the first success or fail after a start.
CREATE TABLE pings (
    seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text PRIMARY KEY,
    heartbeat_id text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('success', 'fail', 'start')),
    created      bigint NOT NULL,
    duration_ms  double precision,
    source_ip    text
);
CREATE INDEX pings_by_heartbeat ON pings (heartbeat_id, created, seq);
CREATE INDEX pings_age ON pings (created);

-- The engine's status moves of heartbeats are logged in `status_changes` beside the
-- monitors' (monitor_id holds the hbt_ id, check_id the move's own id: a batch retried
-- after a lost commit acknowledgement logs, and so causes, nothing twice).
