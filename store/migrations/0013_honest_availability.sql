-- Availability that is honest (extensions part 4; README, "History: partitions, rollups,
-- retention"; store/rollups.py describes the rules):
--
-- * a move into `down` holds from the first failed check of its episode, and time in which
--   no check was recorded for more than two intervals is `unknown`. Both are written as
--   checks are written, by the store actor's batch (store/checks.py), never by a rescan.
-- * `status_changes.created` is from now on when the new status began to hold: the first
--   failed check of the episode for a move into `down` (the check that caused the move is
--   `check_id`), and the edges of a span without checks, logged as a move into `unknown`
--   (at the last check plus one interval) and one back out of it (at the next check).
--   Rows written before this migration keep the time of the move; nothing is rewritten.
--   No schema change: `to_status` was always free text.

-- 1. The last check of each rollup hour (epoch seconds; NULL: an hour that only holds
--    status seconds, or one rolled up before this migration). The batch reads a monitor's
--    newest one to tell how long it went without a check.
ALTER TABLE check_rollups ADD COLUMN last_check bigint;

-- The newest hour with checks of each monitor gets its last check from the raw checks
-- (one index range per monitor; older hours are never read for it).
UPDATE check_rollups r SET last_check = l.last
FROM monitors m
CROSS JOIN LATERAL (SELECT h.hour FROM check_rollups h
                    WHERE h.monitor_id = m.id AND h.checks > 0
                    ORDER BY h.hour DESC LIMIT 1) AS newest
CROSS JOIN LATERAL (SELECT max(c.created) AS last FROM checks c
                    WHERE c.monitor_id = m.id AND c.created >= newest.hour
                      AND c.created < newest.hour + 3600) AS l
WHERE r.monitor_id = m.id AND r.hour = newest.hour;
