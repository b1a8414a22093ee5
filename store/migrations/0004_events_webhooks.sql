-- From a failing check to the people who must know (extensions parts 1-3): events as a
-- transactional outbox, webhook endpoints and their deliveries, incidents opened by
-- monitors and incident timelines.

-- Ids made inside SQL, in the format of store/ids.py `new_id`: the prefix, `_`, and 24
-- characters of lowercase base32 (120 random bits: the low 5 bits of 24 random bytes of
-- two version-4 UUIDs, skipping the bytes that carry the UUID's fixed version and
-- variant bits).
CREATE FUNCTION new_id(prefix text) RETURNS text
LANGUAGE sql VOLATILE PARALLEL SAFE AS $fn$
    SELECT prefix || '_' || string_agg(
        substr('abcdefghijklmnopqrstuvwxyz234567', get_byte(b, i) % 32 + 1, 1), '' ORDER BY i)
    FROM (SELECT uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS b) AS r,
         unnest(ARRAY[0, 1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13, 14, 15,
                      16, 17, 18, 19, 20, 21, 23, 25, 26, 27]) AS i
$fn$;

-- "<n>d <n>h", "<n>h <n>m", "<n>m <n>s" or "<n>s": a duration for people, the two largest
-- units (the resolution message of an incident a monitor resolves, part 3).
CREATE FUNCTION human_duration(seconds bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT CASE
        WHEN s >= 86400 THEN (s / 86400) || 'd ' || (s % 86400 / 3600) || 'h'
        WHEN s >= 3600 THEN (s / 3600) || 'h ' || (s % 3600 / 60) || 'm'
        WHEN s >= 60 THEN (s / 60) || 'm ' || (s % 60) || 's'
        ELSE s || 's' END
    FROM (SELECT greatest(seconds, 0) AS s) AS d
$fn$;

-- 1. Monitors open incidents (part 3).
ALTER TABLE monitors
    ADD COLUMN auto_incidents boolean NOT NULL DEFAULT true,
    ADD COLUMN incident_severity text NOT NULL DEFAULT 'major'
        CHECK (incident_severity IN ('critical', 'major', 'minor', 'maintenance'));

-- 2. Incidents: the monitor that opened one, the monitors it affects, a postmortem.
ALTER TABLE incidents
    ADD COLUMN monitor_id text,
    ADD COLUMN monitors text[] NOT NULL DEFAULT '{}',
    ADD COLUMN postmortem text;
-- "While that incident is open, further downs of the monitor open nothing new."
CREATE INDEX incidents_open_by_monitor ON incidents (monitor_id)
    WHERE resolved_at IS NULL AND monitor_id IS NOT NULL;
CREATE INDEX incidents_by_monitors ON incidents USING gin (monitors);
-- "incidents opened by this monitor in the range" (availability, part 4).
CREATE INDEX incidents_by_monitor ON incidents (monitor_id, created)
    WHERE monitor_id IS NOT NULL;

-- 3. The incident's timeline, oldest first (by seq).
CREATE TABLE incident_updates (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id          text PRIMARY KEY,
    account_id  text NOT NULL,
    incident_id text NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
    status      text NOT NULL
                CHECK (status IN ('investigating', 'identified', 'monitoring', 'resolved')),
    message     text,
    created     bigint NOT NULL
);
CREATE INDEX incident_updates_by_incident ON incident_updates (incident_id, seq);

-- 4. Events, the outbox. `object` is the resource's record (store/records.py field names)
--    right after the change; `previous` the changed columns' old values. The web layer
--    shapes both into the API's event object when it is read or delivered.
CREATE TABLE events (
    seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id              text PRIMARY KEY,
    account_id      text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    type            text NOT NULL,
    resource_id     text NOT NULL,
    created         bigint NOT NULL,
    object          jsonb NOT NULL,
    previous        jsonb,
    request_id      text,
    idempotency_key text
);
CREATE INDEX events_by_created ON events (account_id, created, seq);
CREATE INDEX events_age ON events (created);

-- 5. Webhook endpoints (part 2). During a rotation the old secret stays valid until
--    `previous_secret_expires_at` (epoch seconds).
CREATE TABLE webhook_endpoints (
    seq                        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                         text PRIMARY KEY,
    account_id                 text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    url                        text NOT NULL,
    enabled_events             text[] NOT NULL,
    description                text,
    status                     text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    secret                     text NOT NULL,
    previous_secret            text,
    previous_secret_expires_at bigint,
    created                    bigint NOT NULL,
    updated                    bigint NOT NULL,
    metadata                   jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX webhook_endpoints_by_created ON webhook_endpoints (account_id, created, seq);
CREATE INDEX webhook_endpoints_enabled ON webhook_endpoints (account_id) WHERE status = 'enabled';

-- 6. Deliveries: one per event per endpoint subscribed when the event was written.
--    `next_attempt_at` (epoch seconds, fractional) is when a sender may next claim it; a
--    claim moves it past the attempt's deadline, so a sender that dies mid-attempt leaves
--    the delivery to be claimed again (at least once).
CREATE TABLE webhook_deliveries (
    seq                  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                   text PRIMARY KEY,
    account_id           text NOT NULL,
    endpoint_id          text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id             text NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    status               text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts             integer NOT NULL DEFAULT 0,
    last_attempt_at      bigint,
    last_response_status integer,
    last_error           text,
    last_duration_ms     double precision,
    next_attempt_at      double precision,
    created              bigint NOT NULL,
    give_up_at           bigint NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, created, seq);
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (event_id);

-- The fan-out: every statement that writes events writes, in its own transaction, a
-- pending delivery for each enabled endpoint of the event's account that subscribes to
-- its type ("*", the exact type, or a "monitor.*" prefix). Retries give up 3 days after
-- the event (part 2).
CREATE FUNCTION event_subscribed(patterns text[], event_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT EXISTS (
        SELECT 1 FROM unnest(patterns) AS p
        WHERE p = '*' OR p = event_type
           OR (right(p, 2) = '.*' AND starts_with(event_type, left(p, -1))))
$fn$;

CREATE FUNCTION fan_out_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO webhook_deliveries (id, account_id, endpoint_id, event_id, status,
                                    next_attempt_at, created, give_up_at)
    SELECT new_id('whd'), e.account_id, w.id, e.id, 'pending', e.created, e.created,
           e.created + 3 * 86400
    FROM new_events e
    JOIN webhook_endpoints w ON w.account_id = e.account_id AND w.status = 'enabled'
    WHERE event_subscribed(w.enabled_events, e.type)
    ORDER BY e.seq, w.seq;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER events_fan_out AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION fan_out_events();
