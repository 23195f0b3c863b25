-- Email: stored templates, the suppression list and the delivery log.

CREATE TABLE email_templates (
    name        TEXT PRIMARY KEY,
    subject     TEXT NOT NULL,
    html        TEXT,
    text        TEXT,
    created_at  INTEGER NOT NULL,
    modified_at INTEGER NOT NULL,
    CHECK (html IS NOT NULL OR text IS NOT NULL)
);

CREATE TABLE suppressions (
    address    TEXT PRIMARY KEY,  -- normalised: trimmed, lower-case
    reason     TEXT NOT NULL CHECK (reason IN ('BOUNCE', 'COMPLAINT', 'UNSUBSCRIBE', 'MANUAL')),
    created_at INTEGER NOT NULL
);

CREATE TABLE email_deliveries (
    seq          INTEGER PRIMARY KEY,   -- insertion order: the log's stable sort key
    id           TEXT NOT NULL UNIQUE,  -- execution id (schedules) or the send's id
    message_id   TEXT NOT NULL,
    execution_id TEXT,
    schedule     TEXT,                  -- group/name of the schedule that fired it
    template     TEXT,
    sender       TEXT NOT NULL,
    recipients   TEXT NOT NULL,         -- JSON list of envelope recipients
    state        TEXT NOT NULL CHECK (state IN ('QUEUED', 'SENT', 'SUPPRESSED', 'BOUNCED',
                                                'FAILED', 'RENDERING_FAILURE')),
    detail       TEXT,                  -- the relay's reply, or the error
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX email_deliveries_time ON email_deliveries (created_at, seq);
CREATE INDEX email_deliveries_state ON email_deliveries (state, seq);

-- One row per (delivery, recipient): lists a recipient's deliveries by index.
CREATE TABLE email_delivery_recipients (
    address      TEXT NOT NULL,         -- normalised
    delivery_seq INTEGER NOT NULL,
    PRIMARY KEY (address, delivery_seq)
) WITHOUT ROWID;
