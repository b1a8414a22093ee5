-- One JWT secret per database (README: Several nodes). A fingerprint of each secret the
-- nodes must share: an HMAC-SHA256 of a fixed string keyed by the secret, never the secret
-- itself. The first process to start on the database records it; every later `uptrio
-- serve` and `uptrio tokens` command compares its own and refuses to run on a mismatch.
CREATE TABLE secret_fingerprints (
    name        text PRIMARY KEY,
    fingerprint text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- A token's optional name (`uptrio tokens create --name`), shown by `uptrio tokens list`.
ALTER TABLE api_tokens ADD COLUMN name text CHECK (length(name) BETWEEN 1 AND 100);
