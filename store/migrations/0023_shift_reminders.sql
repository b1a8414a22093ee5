-- Shift reminders (docs/on-call.md, "Shift reminders"; store/shift_reminders.py): a member
-- is told on their contact channels 10 minutes before each of their shifts starts, once,
-- whatever restarts or nodes come in between. All times are epoch seconds.
--
-- `schedules.reminders_planned_until`: the reminder walk has written, into
-- `shift_reminders`, every shift start of the schedule before this instant (NULL: plan it
-- from now). Every change of who is on call (layers, time zone, overrides, a member
-- deleted) sets it back to NULL, so the next walk plans again.
ALTER TABLE schedules ADD COLUMN reminders_planned_until bigint;
CREATE INDEX schedules_reminders_due ON schedules (reminders_planned_until NULLS FIRST);

-- One row per shift start of one member: `(schedule_id, member_id, starts_at)` is unique,
-- so however many nodes plan it, it is told once. `due_at` is 10 minutes before the
-- start. `status`: `planned` (not yet due), `sent` (its notifications written, in the
-- same transaction), `void` (the schedule changed: that member no longer starts a shift
-- then), `missed` (no node walked before the shift started). `ends_at`: the end of the
-- shift, written when it is sent.
CREATE TABLE shift_reminders (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id text NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    account_id  text NOT NULL,
    member_id   text NOT NULL,
    starts_at   bigint NOT NULL,
    ends_at     bigint,
    due_at      bigint NOT NULL,
    status      text NOT NULL DEFAULT 'planned'
                CHECK (status IN ('planned', 'sent', 'void', 'missed')),
    handled_at  bigint,
    UNIQUE (schedule_id, member_id, starts_at)
);
CREATE INDEX shift_reminders_due ON shift_reminders (due_at) WHERE status = 'planned';
CREATE INDEX shift_reminders_by_start ON shift_reminders (starts_at);

-- The notice itself goes through the outbox of alerts (migration 0018) as kind
-- `shift_starting`, without an alert, pointing at its reminder.
ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check
    CHECK (kind IN ('trigger', 'escalation', 'reminder', 'acknowledged', 'resolved', 'test',
                    'shift_starting'));
ALTER TABLE notifications ADD COLUMN reminder_seq bigint
    REFERENCES shift_reminders (seq) ON DELETE CASCADE;
CREATE INDEX notifications_by_reminder ON notifications (reminder_seq)
    WHERE reminder_seq IS NOT NULL;
