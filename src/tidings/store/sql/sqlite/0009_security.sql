-- Security (docs/security.md). The audit log: who (a token id or an access key id) did
-- which destructive or administrative action, on what, and when; append-only.
CREATE TABLE audit_log (
    seq      INTEGER PRIMARY KEY,   -- insertion order: the log's stable sort key
    at       INTEGER NOT NULL,
    actor    TEXT NOT NULL,
    face     TEXT NOT NULL,
    action   TEXT NOT NULL,
    resource TEXT NOT NULL
);
CREATE INDEX audit_log_actor ON audit_log (actor, seq);

-- Verified email identities (SES v2 CreateEmailIdentity): addresses or domains a From
-- address may use, beside those of TIDINGS_EMAIL_IDENTITIES.
CREATE TABLE email_identities (
    identity   TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
