-- Security (docs/security.md). The audit log: who (a token id or an access key id) did
-- which destructive or administrative action, on what, and when; append-only.
CREATE TABLE audit_log (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       bigint NOT NULL,
    actor    text NOT NULL,
    face     text NOT NULL,
    action   text NOT NULL,
    resource text NOT NULL
);
CREATE INDEX audit_log_actor ON audit_log (actor, seq);

-- Verified email identities (SES v2 CreateEmailIdentity): addresses or domains a From
-- address may use, beside those of TIDINGS_EMAIL_IDENTITIES.
CREATE TABLE email_identities (
    identity   text PRIMARY KEY,
    created_at bigint NOT NULL
);
