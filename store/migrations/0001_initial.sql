-- Uptrio schema, version 1. Timestamps shown by the API are integer epoch seconds.
-- `seq` columns are the tie-breakers of keyset pagination (ids are random).

CREATE TABLE accounts (
    id          text PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    api_version text,                      -- pinned when the first token is created (spec 9.2)
    created     bigint NOT NULL
);

CREATE TABLE api_tokens (
    id          text PRIMARY KEY,
    account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    permissions text[] NOT NULL,
    created     bigint NOT NULL,
    expires_at  bigint,
    revoked_at  bigint
);
CREATE INDEX api_tokens_account ON api_tokens (account_id, created);

CREATE TABLE monitors (
    seq                  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                   text PRIMARY KEY,
    account_id           text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name                 text NOT NULL,
    url                  text NOT NULL,
    type                 text NOT NULL CHECK (type IN ('http', 'tcp', 'dns', 'ping')),
    status               text NOT NULL CHECK (status IN ('up', 'down', 'pending', 'paused')),
    interval_seconds     integer NOT NULL,
    timeout_seconds      integer NOT NULL,
    method               text,
    expected_status_code integer,
    failure_threshold    integer NOT NULL DEFAULT 2,
    success_threshold    integer NOT NULL DEFAULT 1,
    -- bumped by create, pause and resume; a status written by the engine for an older
    -- epoch is ignored, so a late result never overwrites a pause or a resume.
    run_epoch            integer NOT NULL DEFAULT 0,
    created              bigint NOT NULL,
    updated              bigint NOT NULL,
    metadata             jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX monitors_by_created ON monitors (account_id, created, seq);
CREATE INDEX monitors_by_updated ON monitors (account_id, updated, seq);
CREATE INDEX monitors_by_name ON monitors (account_id, name, seq);
CREATE INDEX monitors_active ON monitors (seq) WHERE status <> 'paused';

CREATE TABLE incidents (
    seq                bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                 text PRIMARY KEY,
    account_id         text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    title              text NOT NULL,
    description        text,
    status             text NOT NULL
                       CHECK (status IN ('investigating', 'identified', 'monitoring', 'resolved')),
    severity           text NOT NULL CHECK (severity IN ('critical', 'major', 'minor', 'maintenance')),
    resolved_at        bigint,
    resolution_message text,
    created            bigint NOT NULL,
    updated            bigint NOT NULL,
    metadata           jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX incidents_by_created ON incidents (account_id, created, seq);
CREATE INDEX incidents_by_updated ON incidents (account_id, updated, seq);
CREATE INDEX incidents_by_title ON incidents (account_id, title, seq);

-- Check results. No foreign key to monitors: the store actor's batches must not fail as a
-- whole when a monitor is deleted while its last results are queued; inserts join on
-- monitors instead, and deleting a monitor deletes its checks.
CREATE TABLE checks (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               text NOT NULL UNIQUE,
    monitor_id       text NOT NULL,
    status           text NOT NULL CHECK (status IN ('up', 'down')),
    response_time_ms double precision NOT NULL,
    status_code      integer,
    error_code       text,
    error_message    text,
    created          bigint NOT NULL
);
CREATE INDEX checks_by_monitor ON checks (monitor_id, seq DESC);

-- Every status change, with the check that caused it (DESIGN: Engine, state machine).
CREATE TABLE status_changes (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    monitor_id  text NOT NULL,
    check_id    text UNIQUE,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    created     bigint NOT NULL
);
CREATE INDEX status_changes_by_monitor ON status_changes (monitor_id, seq DESC);

-- The sort keys of deleted objects, so a page cursor naming an object deleted between
-- two pages still pages on correctly. Kept 24 hours.
CREATE TABLE cursor_tombstones (
    id          text PRIMARY KEY,
    account_id  text NOT NULL,
    created     bigint NOT NULL,
    updated     bigint NOT NULL,
    name        text NOT NULL,
    seq         bigint NOT NULL,
    deleted_at  bigint NOT NULL
);
CREATE INDEX cursor_tombstones_age ON cursor_tombstones (deleted_at);
