-- Email subscribers of a status page and the outbox of their mails (docs/status-pages.md,
-- "Subscribers"; store/page_subscribers.py). All times are epoch seconds.
--
-- A subscriber is `pending` until the link of its confirmation mail is followed, then
-- `confirmed`. Its confirm token (128 random bits) is kept only as a SHA-256 digest (hex);
-- its unsubscribe key (128 random bits) is an opaque key every later mail carries.
CREATE TABLE page_subscribers (
    id              text PRIMARY KEY,
    page_id         text NOT NULL REFERENCES status_pages (id) ON DELETE CASCADE,
    email           text NOT NULL,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'confirmed')),
    confirm_digest  text NOT NULL UNIQUE,
    unsubscribe_key text NOT NULL UNIQUE,
    created         bigint NOT NULL,
    confirmed_at    bigint,
    UNIQUE (page_id, email)
);
CREATE INDEX page_subscribers_by_page_created ON page_subscribers (page_id, created);

-- The outbox of subscriber mails: written in the transaction that causes them, claimed
-- FOR UPDATE SKIP LOCKED by the page mailer of any node, retried with back-off until
-- `give_up_at`. `link_path` is the path of the mail's link (with the confirm token of a
-- confirmation mail, the unsubscribe key of the others); a confirmation mail's is cleared
-- once the mail is settled. `email` is kept (not joined) so the per-address limit counts confirmation mails
-- of subscribers since deleted too.
CREATE TABLE page_mails (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscriber_id   text REFERENCES page_subscribers (id) ON DELETE SET NULL,
    page_id         text NOT NULL REFERENCES status_pages (id) ON DELETE CASCADE,
    email           text NOT NULL,
    kind            text NOT NULL,
    subject         text NOT NULL,
    body            text NOT NULL,
    link_path       text,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text,
    next_attempt_at double precision,
    give_up_at      double precision NOT NULL,
    created         bigint NOT NULL
);
CREATE INDEX page_mails_due ON page_mails (next_attempt_at) WHERE status = 'pending';
-- the two limits (store/page_subscribers.py): confirmation mails per address, per page
CREATE INDEX page_mails_confirm_by_email ON page_mails (email, created) WHERE kind = 'confirm';
CREATE INDEX page_mails_confirm_by_page ON page_mails (page_id, created) WHERE kind = 'confirm';
