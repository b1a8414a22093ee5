-- How http monitors verify https targets (extensions part 7, "Private certificate
-- authorities"; README of the same name). `tls_verify` is true on http monitors (false:
-- any certificate is accepted) and NULL on the other types; `tls_ca_bundle` is the PEM
-- text of the CAs to verify against instead of the system's, or NULL. The API checks
-- every rule (the bundle must parse); the table keeps the bounds.
ALTER TABLE monitors
    ADD COLUMN tls_verify    boolean,
    ADD COLUMN tls_ca_bundle text CHECK (octet_length(tls_ca_bundle) <= 65536);

-- Existing http monitors verify as they did (the system's CAs).
UPDATE monitors SET tls_verify = true WHERE type = 'http';
