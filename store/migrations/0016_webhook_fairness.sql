-- The webhook sender's fair claim (README "Webhooks", fairness; store/deliveries.py
-- claim_due): it finds the endpoints that have due deliveries by skipping through this
-- index one endpoint at a time, then reads each one's oldest due deliveries from it, so
-- that one endpoint's or one account's backlog, however long, never hides another's.
-- The index on next_attempt_at alone (0004) stays: it answers "is anything due?" at once.
CREATE INDEX webhook_deliveries_due_by_endpoint ON webhook_deliveries (endpoint_id, next_attempt_at)
    WHERE status = 'pending';
