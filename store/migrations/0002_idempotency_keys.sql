-- Idempotency keys (spec 4.5): the response of a successful POST, replayed for a retry
-- with the same key within 24 hours. Written in the same transaction as the POST's own
-- write (web/idempotency.py), so a key is stored if and only if its effect is.
CREATE TABLE idempotency_keys (
    account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key         text NOT NULL,
    fingerprint text NOT NULL,            -- sha256 of method, path and canonical JSON body
    status      integer NOT NULL,         -- always 2xx: only successes are kept
    body        text,                     -- the response body's JSON text, or NULL
    headers     jsonb NOT NULL DEFAULT '{}',
    created     bigint NOT NULL,          -- epoch seconds
    PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (created);
