-- Contact lists with topics, and their contacts (SES v2 list management): an unsubscribe
-- from list mail opts the contact out of that list or topic, not the account.
-- Not additive: a node that predates it would still answer an unsubscribe from list mail
-- with the account suppression list and would not skip opted-out contacts.
CREATE TABLE contact_lists (
    name        text PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    topics      text NOT NULL,          -- JSON list of SES Topic objects
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);

CREATE TABLE contacts (
    list_name       text NOT NULL,
    address         text NOT NULL,      -- normalised: trimmed, lower-case
    preferences     text NOT NULL,      -- JSON object: topic name -> OPT_IN | OPT_OUT
    unsubscribe_all boolean NOT NULL DEFAULT false,
    attributes      text,               -- AttributesData, as given
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL,
    PRIMARY KEY (list_name, address)
);

-- Bounces and complaints that came back after a send (DSNs, ARF reports, relay webhooks),
-- matched to their delivery when they could be.
CREATE TABLE email_events (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id text,                   -- the delivery the event is about, when known
    address     text NOT NULL,          -- normalised
    kind        text NOT NULL CHECK (kind IN ('HARD_BOUNCE', 'SOFT_BOUNCE', 'COMPLAINT')),
    source      text NOT NULL,          -- dsn, arf, ses, postmark
    detail      text NOT NULL,
    created_at  bigint NOT NULL
);
CREATE INDEX email_events_delivery ON email_events (delivery_id, seq);
CREATE INDEX email_events_address ON email_events (address, seq);
