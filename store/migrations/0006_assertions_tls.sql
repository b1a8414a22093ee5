-- Assertions and TLS certificate expiry on http monitors (extensions part 7).
-- `request_headers` (object of string values) and `assertions` (array of {source,
-- property, comparison, target}) are '{}' and '[]' on http monitors and NULL on the other
-- types, like `request_body` (text or NULL) and `tls_expiry_days` (0 to 365 or NULL: the
-- API sets 14 for https urls). The API checks every rule; the table keeps the bounds.
ALTER TABLE monitors
    ADD COLUMN request_headers jsonb,
    ADD COLUMN request_body    text,
    ADD COLUMN assertions      jsonb,
    ADD COLUMN tls_expiry_days integer CHECK (tls_expiry_days BETWEEN 0 AND 365);

-- Existing http monitors take the defaults a new one gets (certificate expiry checked
-- 14 days ahead for https urls).
UPDATE monitors
SET request_headers = '{}',
    assertions = '[]',
    tls_expiry_days = CASE WHEN lower(url) LIKE 'https:%' THEN 14 END
WHERE type = 'http';

-- When the certificate of an https check's final response expires (epoch seconds);
-- NULL for plain http and other types. Added to the partitioned parent: every partition,
-- present and future, has it.
ALTER TABLE checks ADD COLUMN tls_expires_at bigint;
