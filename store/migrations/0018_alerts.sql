-- Alerts that reach people (docs/alerts.md): members, notification channels, escalation
-- policies, alerts, their notifications (an outbox, claimed FOR UPDATE SKIP LOCKED like
-- webhook deliveries) and every attempt to send one, and the one-click acknowledge links.

-- 1. Notification channels: where a message goes. `config` holds the type's settings,
--    secrets included (the API never shows them: it masks them, "…abcd").
CREATE TABLE notification_channels (
    seq           bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id            text PRIMARY KEY,
    account_id    text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name          text NOT NULL,
    type          text NOT NULL CHECK (type IN ('email', 'slack', 'discord', 'teams',
                      'telegram', 'pagerduty', 'opsgenie', 'ntfy', 'webhook')),
    config        jsonb NOT NULL,
    enabled       boolean NOT NULL DEFAULT true,
    send_resolved boolean NOT NULL DEFAULT true,
    created       bigint NOT NULL,
    updated       bigint NOT NULL,
    metadata      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX notification_channels_by_created ON notification_channels (account_id, created, seq);

-- 2. Members: people who can be paged, on their contact channels in order.
CREATE TABLE members (
    seq              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id               text PRIMARY KEY,
    account_id       text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name             text NOT NULL,
    email            text,
    time_zone        text NOT NULL DEFAULT 'UTC',
    contact_channels text[] NOT NULL DEFAULT '{}',
    created          bigint NOT NULL,
    updated          bigint NOT NULL,
    metadata         jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX members_by_created ON members (account_id, created, seq);
CREATE INDEX members_by_channel ON members USING gin (contact_channels);

-- 3. Escalation policies. `steps`: [{"delay_seconds": n, "targets": [{"type": "member" |
--    "schedule" | "channel", "id": "..."}]}], each delay counted from the step before (the
--    first from the trigger). At most one default policy per account.
CREATE TABLE escalation_policies (
    seq        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id         text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name       text NOT NULL,
    steps      jsonb NOT NULL,
    repeat     integer NOT NULL DEFAULT 0 CHECK (repeat BETWEEN 0 AND 9),
    is_default boolean NOT NULL DEFAULT false,
    created    bigint NOT NULL,
    updated    bigint NOT NULL,
    metadata   jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX escalation_policies_by_created ON escalation_policies (account_id, created, seq);
CREATE UNIQUE INDEX escalation_policies_one_default ON escalation_policies (account_id)
    WHERE is_default;

-- 4. A monitor's or heartbeat's own policy (NULL: the account's default, if any). No
--    foreign key: deleting a policy in use is refused by the store (409 policy_in_use).
ALTER TABLE monitors ADD COLUMN escalation_policy text;
ALTER TABLE heartbeats ADD COLUMN escalation_policy text;
CREATE INDEX monitors_by_policy ON monitors (escalation_policy)
    WHERE escalation_policy IS NOT NULL;
CREATE INDEX heartbeats_by_policy ON heartbeats (escalation_policy)
    WHERE escalation_policy IS NOT NULL;

-- 5. Alerts: one page-worthy episode of a monitor or heartbeat (`resource_id`: mon_ or
--    hbt_). The walk of its policy is data: `escalation_step` is the index of the last
--    step notified (-1: none yet), `walks` how many times the steps were walked from the
--    first, `next_step_at` (epoch seconds, fractional) when the next step is due (NULL:
--    nothing due: acknowledged, resolved, no policy, or the walk is over). A claim of a
--    due alert (FOR UPDATE SKIP LOCKED) notifies its step and moves these on, in one
--    transaction, so each step is sent by exactly one node, once.
CREATE TABLE alerts (
    seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                text PRIMARY KEY,
    account_id        text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    resource_id       text NOT NULL,
    incident_id       text,
    status            text NOT NULL CHECK (status IN ('triggered', 'acknowledged', 'resolved')),
    severity          text NOT NULL,
    summary           text NOT NULL,
    escalation_policy text,
    escalation_step   integer NOT NULL DEFAULT -1,
    walks             integer NOT NULL DEFAULT 0,
    next_step_at      double precision,
    triggered_at      bigint NOT NULL,
    acknowledged_at   bigint,
    acknowledged_by   jsonb,
    resolved_at       bigint,
    created           bigint NOT NULL,
    updated           bigint NOT NULL,
    metadata          jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX alerts_by_created ON alerts (account_id, created, seq);
CREATE INDEX alerts_by_resource ON alerts (resource_id, created);
-- One open alert per monitor or heartbeat: further downs raise nothing while it is open.
CREATE UNIQUE INDEX alerts_open_by_resource ON alerts (resource_id)
    WHERE status <> 'resolved';
CREATE INDEX alerts_due ON alerts (next_step_at) WHERE next_step_at IS NOT NULL;

-- 6. Notifications, the outbox: one message to one channel (`member_id`: the member told
--    through it, or NULL for a channel target). `next_attempt_at` (epoch seconds,
--    fractional) is when a notifier may claim it next; a claim moves it past the
--    attempt's deadline, so a notifier that dies mid-attempt leaves it to be claimed
--    again. `ack_token` is the acknowledge link's token the message carries (NULL: none,
--    e.g. a resolution notice).
CREATE TABLE notifications (
    seq                  bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                   text PRIMARY KEY,
    account_id           text NOT NULL,
    alert_id             text REFERENCES alerts (id) ON DELETE CASCADE,
    channel_id           text NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    member_id            text,
    kind                 text NOT NULL CHECK (kind IN ('trigger', 'escalation', 'reminder',
                             'acknowledged', 'resolved', 'test')),
    step                 integer,
    status               text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed',
                             'cancelled')),
    ack_token            text,
    attempts             integer NOT NULL DEFAULT 0,
    last_attempt_at      bigint,
    next_attempt_at      double precision,
    give_up_at           bigint NOT NULL,
    created              bigint NOT NULL
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE status = 'pending';
CREATE INDEX notifications_by_alert ON notifications (alert_id, seq);

-- 7. Every attempt to send a notification.
CREATE TABLE notification_attempts (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id text NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    attempted_at    bigint NOT NULL,
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    response_status integer,
    error           text,
    duration_ms     double precision NOT NULL
);
CREATE INDEX notification_attempts_by_notification ON notification_attempts (notification_id, seq);

-- 8. One-click acknowledge links: 128 random bits, bound to one alert and one member or
--    channel; deleted when the alert resolves (the link then dies).
CREATE TABLE alert_ack_tokens (
    token      text PRIMARY KEY,
    alert_id   text NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    member_id  text,
    channel_id text,
    created    bigint NOT NULL
);
CREATE INDEX alert_ack_tokens_by_alert ON alert_ack_tokens (alert_id);
