-- Maintenance windows hold back alerts (docs/maintenance.md, "Alerts held back"): a monitor
-- or heartbeat that moves into down inside an open occurrence of a window with
-- `suppress_alerts` opens no incident and raises no alert (store.alerting).
--
-- `monitors.suppressed_by` (migration 0020) now also says
-- {"type": "maintenance", "id": "mnt_..."}; heartbeats gain the same column: why the
-- current down episode opened no incident and raised no alert (NULL: nothing held back).
-- Set by the batch round that moves it into down inside the window; cleared by its move
-- into up, or by the batch that next finds it down once the window is over (and, for a
-- monitor, no dependency holds it back), which opens the held-back incident and alert then.
ALTER TABLE heartbeats ADD COLUMN suppressed_by jsonb;
CREATE INDEX heartbeats_suppressed ON heartbeats (id) WHERE suppressed_by IS NOT NULL;
