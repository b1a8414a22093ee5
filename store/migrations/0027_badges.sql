-- Uptime badges (docs/badges.md; the extensions' part 12, "Badges").
--
-- `badge_key`: the secret in a monitor's public badge URLs (`/badges/<badge_key>/...`),
-- 128 random bits as 32 hex digits, or NULL while badges are off. `POST
-- /monitors/:id/badge-key` sets a fresh one (the old one stops working), `DELETE` clears
-- it. Unique, so a public read finds its monitor by one index lookup.
ALTER TABLE monitors ADD COLUMN badge_key text;
CREATE UNIQUE INDEX monitors_badge_key ON monitors (badge_key) WHERE badge_key IS NOT NULL;
