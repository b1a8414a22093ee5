-- Monitor dependencies (docs/incidents.md, "Dependencies"): a monitor that goes down while
-- a monitor it depends on is down opens no incident and raises no alert.

-- 1. The monitors a monitor depends on: at most 10 mon_ ids of its own account, no cycle
--    (both checked by the store under a per-account advisory lock: store.dependencies).
--    No foreign key: deleting a monitor removes its id from the others' arrays in the
--    deleting transaction.
ALTER TABLE monitors ADD COLUMN depends_on text[] NOT NULL DEFAULT '{}';

-- 2. Why the monitor's current down episode opened no incident and raised no alert:
--    {"type": "dependency", "id": "mon_..."} (NULL: nothing held back). Set by the batch
--    round that moves it into down while a parent is down; cleared by its move into up,
--    or by the batch that writes its next down check once no parent is down, which opens
--    the held-back incident and alert then.
ALTER TABLE monitors ADD COLUMN suppressed_by jsonb;
CREATE INDEX monitors_suppressed ON monitors (id) WHERE suppressed_by IS NOT NULL;
