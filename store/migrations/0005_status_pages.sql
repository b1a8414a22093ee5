-- Status pages (extensions part 5): the public face of an account's monitors.
-- `slug` names the page in its public address (/status/<slug>) and is unique over the whole
-- service, not per account: the constraint `status_pages_slug_key` is what a racing
-- create or rename runs into (the API answers 422 slug_taken, never a 500).
-- `components` is the page's ordered list of {"monitor": "mon_...", "name": "...",
-- "group": "..." or null}; the monitors are the account's own (checked by the API; a
-- monitor deleted later simply drops off the public page).
CREATE TABLE status_pages (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id          text PRIMARY KEY,
    account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name        text NOT NULL,
    slug        text NOT NULL CONSTRAINT status_pages_slug_key UNIQUE
                CHECK (slug ~ '^[a-z0-9]([a-z0-9-]{1,58})[a-z0-9]$'),
    description text,
    components  jsonb NOT NULL DEFAULT '[]',
    created     bigint NOT NULL,
    updated     bigint NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}'
);
-- Keyset pagination (store/pagination.py): (account, sort key, seq).
CREATE INDEX status_pages_by_created ON status_pages (account_id, created, seq);
CREATE INDEX status_pages_by_updated ON status_pages (account_id, updated, seq);
CREATE INDEX status_pages_by_name ON status_pages (account_id, name, seq);
