-- Several nodes on one Postgres (extensions part 6; issue 14).
--
-- Monitors and heartbeats are split into 256 buckets by the first byte of the md5 of
-- their id: the same number Python computes (store.leases.bucket_of), so the engine's
-- load filters in SQL (`WHERE bucket = ANY($1)`) and the fence joins on it.
ALTER TABLE monitors
    ADD COLUMN bucket smallint NOT NULL GENERATED ALWAYS AS (get_byte(decode(md5(id), 'hex'), 0)) STORED;
ALTER TABLE heartbeats
    ADD COLUMN bucket smallint NOT NULL GENERATED ALWAYS AS (get_byte(decode(md5(id), 'hex'), 0)) STORED;
CREATE INDEX monitors_bucket ON monitors (bucket);
CREATE INDEX heartbeats_bucket ON heartbeats (bucket);

-- A node: one `uptrio serve` process, by its --node-name. `renewed_at` is its latest
-- lease renewal (the database's clock: one clock for all nodes); it is live while
-- renewed_at + lease_seconds is in the future and it is not `stopping`.
CREATE TABLE nodes (
    name          text PRIMARY KEY,
    started       timestamptz NOT NULL,
    renewed_at    timestamptz NOT NULL,
    lease_seconds double precision NOT NULL,
    stopping      boolean NOT NULL DEFAULT false
);

-- One row per bucket, always: `node` holds it until `expires_at` (NULL: free). `epoch`
-- grows with every claim, so a write made under an older claim is refused (fencing).
CREATE TABLE bucket_leases (
    bucket     smallint PRIMARY KEY CHECK (bucket BETWEEN 0 AND 255),
    node       text,
    epoch      bigint NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO bucket_leases (bucket) SELECT generate_series(0, 255);
