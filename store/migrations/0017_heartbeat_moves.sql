-- Heartbeats' status moves get a log of their own (docs/heartbeats.md, "States"; the
-- store writes them with the heartbeat's pings: store/pings.py). Until now they were logged
-- in `status_changes` beside the monitors' (monitor_id holding the hbt_ id, check_id the
-- move's hbm_ id, NULL for a pause or a resume); `status_changes` now holds monitors'
-- moves only.
--
-- `move_id` is the engine's id of the move (hbm_): a batch retried after a lost commit
-- acknowledgement logs, and so causes, nothing twice. NULL: a pause or a resume, logged
-- by the API's transaction (store/heartbeats.py). Deleting a heartbeat deletes its moves;
-- they are kept `--rollup-retention-days`, with each heartbeat's last move before the
-- cutoff (store/maintenance.py), as monitors' are.
CREATE TABLE heartbeat_moves (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    heartbeat_id text NOT NULL,
    move_id      text UNIQUE,
    from_status  text NOT NULL,
    to_status    text NOT NULL,
    created      bigint NOT NULL
);
CREATE INDEX heartbeat_moves_by_heartbeat ON heartbeat_moves (heartbeat_id, created);

-- The heartbeats' rows move over in their order (a new seq, in the old seq's order).
INSERT INTO heartbeat_moves (heartbeat_id, move_id, from_status, to_status, created)
SELECT monitor_id, check_id, from_status, to_status, created
FROM status_changes WHERE starts_with(monitor_id, 'hbt_') ORDER BY seq;
DELETE FROM status_changes WHERE starts_with(monitor_id, 'hbt_');
