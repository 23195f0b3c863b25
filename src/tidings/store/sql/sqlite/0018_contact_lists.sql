-- Contact lists with topics, and their contacts (SES v2 list management): an unsubscribe
-- from list mail opts the contact out of that list or topic, not the account.
-- Not additive: a node that predates it would still answer an unsubscribe from list mail
-- with the account suppression list and would not skip opted-out contacts.
CREATE TABLE contact_lists (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    topics      TEXT NOT NULL,          -- JSON list of SES Topic objects
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE contacts (
    list_name       TEXT NOT NULL,
    address         TEXT NOT NULL,      -- normalised: trimmed, lower-case
    preferences     TEXT NOT NULL,      -- JSON object: topic name -> OPT_IN | OPT_OUT
    unsubscribe_all INTEGER NOT NULL DEFAULT 0 CHECK (unsubscribe_all IN (0, 1)),
    attributes      TEXT,               -- AttributesData, as given
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (list_name, address)
);

-- Bounces and complaints that came back after a send (DSNs, ARF reports, relay webhooks),
-- matched to their delivery when they could be.
CREATE TABLE email_events (
    seq         INTEGER PRIMARY KEY,
    delivery_id TEXT,                   -- the delivery the event is about, when known
    address     TEXT NOT NULL,          -- normalised
    kind        TEXT NOT NULL CHECK (kind IN ('HARD_BOUNCE', 'SOFT_BOUNCE', 'COMPLAINT')),
    source      TEXT NOT NULL,          -- dsn, arf, ses, postmark
    detail      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX email_events_delivery ON email_events (delivery_id, seq);
CREATE INDEX email_events_address ON email_events (address, seq);
