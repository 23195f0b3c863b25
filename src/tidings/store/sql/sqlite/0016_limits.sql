-- Downstream limits (issue 33), shared by every process on the file.
-- limits: the settings, per name (`export`) or per key (`export:c-42`, which overrides its
-- name's); written by an app's declarations at its start and by `tidings limit set`.
CREATE TABLE limits (
    key         TEXT PRIMARY KEY,
    rate_count  INTEGER CHECK (rate_count IS NULL OR rate_count > 0),
    period_ms   INTEGER CHECK (period_ms IS NULL OR period_ms > 0),
    burst       INTEGER CHECK (burst IS NULL OR burst > 0),
    concurrency INTEGER CHECK (concurrency IS NULL OR concurrency > 0),
    source      TEXT NOT NULL CHECK (source IN ('code', 'set')),
    updated_at  INTEGER NOT NULL,
    CHECK ((rate_count IS NULL) = (period_ms IS NULL))
);
-- limit_keys: one row per key in use, the row an acquisition locks (PostgreSQL: FOR
-- UPDATE), so nodes take a key's room one at a time; its pause (RetryAfter, a 429, the
-- CLI) and the bucket's theoretical arrival time when the limit has a burst.
CREATE TABLE limit_keys (
    key          TEXT PRIMARY KEY,
    paused_until INTEGER,
    tat          INTEGER
);
-- limit_starts: the sliding window, one row per start within the rate's period.
CREATE TABLE limit_starts (
    key   TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX limit_starts_key ON limit_starts (key, at_ms);
-- limit_slots: concurrency slots are leases: a node killed while holding some gives them
-- back when they expire (the job's visibility timeout), as its messages come back.
CREATE TABLE limit_slots (
    key        TEXT NOT NULL,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (key, holder)
);
