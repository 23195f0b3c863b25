-- additive: one new table; a node that predates it sends without a warm-up, as before.
-- A sending domain's warm-up (TIDINGS_EMAIL_WARMUP): how many emails it offered the relay
-- on each UTC day. Its first row is the warm-up's day 1: the cap of a day is the ladder's
-- step for (day - the domain's first day).
CREATE TABLE email_warmup_days (
    domain TEXT NOT NULL,               -- the From address's domain, lower-case
    day    INTEGER NOT NULL,             -- UTC days since 1970-01-01
    sent   INTEGER NOT NULL DEFAULT 0 CHECK (sent >= 0),
    PRIMARY KEY (domain, day)
);
