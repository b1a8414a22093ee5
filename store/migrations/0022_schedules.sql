-- On-call schedules (docs/on-call.md; store/schedules.py, store/rotation.py): who is on
-- call, in layers of rotations handed off at local wall time in the schedule's IANA
-- `time_zone`, and overrides that win over every layer. All times are epoch seconds.
--
-- `layers`: the API's JSON shape, as store.rotation.plan_json writes it ([{"name",
-- "members": [mbr_...], "rotation": {"type", "length_seconds", "handoff"},
-- "restrictions": [...]}], 1 to 5), checked by store.rotation.parse_plan before every
-- write. `calendar_key`: the secret of the schedule's calendar feed (128 random bits,
-- 32 hex digits), replaced by `POST /schedules/:id/rotate-calendar-key`.
CREATE TABLE schedules (
    seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text PRIMARY KEY,
    account_id   text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name         text NOT NULL,
    time_zone    text NOT NULL,
    layers       jsonb NOT NULL,
    calendar_key text NOT NULL,
    created      bigint NOT NULL,
    updated      bigint NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX schedules_by_created ON schedules (account_id, created, seq);

-- Overrides: `member_id` (a member of the account; deleting the member deletes its
-- overrides) is on call over [starts_at, ends_at), whatever the layers say.
CREATE TABLE schedule_overrides (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id          text PRIMARY KEY,
    schedule_id text NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    member_id   text NOT NULL,
    starts_at   bigint NOT NULL,
    ends_at     bigint NOT NULL,
    created     bigint NOT NULL,
    CHECK (ends_at > starts_at)
);
-- what overlaps a range: the overrides of a schedule that end after its start
CREATE INDEX schedule_overrides_by_end ON schedule_overrides (schedule_id, ends_at);
-- the list, by start
CREATE INDEX schedule_overrides_by_start ON schedule_overrides (schedule_id, starts_at, seq);
-- a deleted member's overrides
CREATE INDEX schedule_overrides_by_member ON schedule_overrides (member_id);
