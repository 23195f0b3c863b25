-- Email: stored templates, the suppression list and the delivery log.

CREATE TABLE email_templates (
    name        text PRIMARY KEY,
    subject     text NOT NULL,
    html        text,
    text        text,
    created_at  bigint NOT NULL,
    modified_at bigint NOT NULL,
    CHECK (html IS NOT NULL OR text IS NOT NULL)
);

CREATE TABLE suppressions (
    address    text PRIMARY KEY,  -- normalised: trimmed, lower-case
    reason     text NOT NULL CHECK (reason IN ('BOUNCE', 'COMPLAINT', 'UNSUBSCRIBE', 'MANUAL')),
    created_at bigint NOT NULL
);

CREATE TABLE email_deliveries (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           text NOT NULL UNIQUE,
    message_id   text NOT NULL,
    execution_id text,
    schedule     text,
    template     text,
    sender       text NOT NULL,
    recipients   text NOT NULL,
    state        text NOT NULL CHECK (state IN ('QUEUED', 'SENT', 'SUPPRESSED', 'BOUNCED',
                                                'FAILED', 'RENDERING_FAILURE')),
    detail       text,
    attempts     integer NOT NULL DEFAULT 0,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL
);
CREATE INDEX email_deliveries_time ON email_deliveries (created_at, seq);
CREATE INDEX email_deliveries_state ON email_deliveries (state, seq);

CREATE TABLE email_delivery_recipients (
    address      text NOT NULL,
    delivery_seq bigint NOT NULL,
    PRIMARY KEY (address, delivery_seq)
);
