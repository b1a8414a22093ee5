-- Work done once across every node on this database (extensions part 6: "retention work
-- is done once, by whichever node claims it"): one row per job, held by one node until
-- `expires_at` (epoch seconds, the database's clock), renewed by its holder at every round.
CREATE TABLE job_leases (
    job        text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at double precision NOT NULL
);
