-- Push subscriptions: a queue whose messages the nodes POST to an HTTP endpoint
-- (`tidings.push`). One per queue. `state` is `SubscriptionState` (model/push.py);
-- `held_until` is set by an endpoint's 429/503 with Retry-After (no push before it);
-- `version` is bumped by every write, and every write compares it (a compare-and-set).
-- The signing secrets: the current one and, during a rotation, the previous one until
-- `previous_until`, so a receiver that still knows only the old one keeps verifying.
CREATE TABLE push_subscriptions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id        INTEGER NOT NULL UNIQUE,
    endpoint        TEXT NOT NULL,
    concurrency     INTEGER NOT NULL CHECK (concurrency BETWEEN 1 AND 1000),
    rate_per_hour   INTEGER CHECK (rate_per_hour IS NULL OR rate_per_hour > 0),
    timeout_ms      INTEGER NOT NULL CHECK (timeout_ms > 0),
    state           TEXT NOT NULL CHECK (state IN ('active', 'paused')),
    held_until      INTEGER,
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  INTEGER,
    created_at      INTEGER NOT NULL,
    modified_at     INTEGER NOT NULL,
    version         INTEGER NOT NULL DEFAULT 0
);

-- The subscription's concurrency, shared by every node: slot k of a subscription is held
-- by at most one node at a time, until `expires_at` (renewed while the node lives), and a
-- node pushes at most as many messages at once as it holds slots. A node that dies
-- loses its slots when their lease runs out.
CREATE TABLE push_slots (
    subscription_id INTEGER NOT NULL,
    slot            INTEGER NOT NULL,
    holder          TEXT,
    expires_at      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subscription_id, slot)
);

-- The last failures of each subscription (the console shows them), trimmed as they come.
CREATE TABLE push_failures (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    message_id      TEXT NOT NULL,
    status          INTEGER,
    error           TEXT NOT NULL
);
CREATE INDEX push_failures_recent ON push_failures (subscription_id, id);
