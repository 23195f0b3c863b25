-- Push subscriptions: a queue whose messages the nodes POST to an HTTP endpoint
-- (`tidings.push`). One per queue. `state` is `SubscriptionState` (model/push.py);
-- `held_until` is set by an endpoint's 429/503 with Retry-After (no push before it);
-- `version` is bumped by every write, and every write compares it (a compare-and-set).
-- The signing secrets: the current one and, during a rotation, the previous one until
-- `previous_until`, so a receiver that still knows only the old one keeps verifying.
CREATE TABLE push_subscriptions (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id        bigint NOT NULL UNIQUE,
    endpoint        text NOT NULL,
    concurrency     bigint NOT NULL CHECK (concurrency BETWEEN 1 AND 1000),
    rate_per_hour   bigint CHECK (rate_per_hour IS NULL OR rate_per_hour > 0),
    timeout_ms      bigint NOT NULL CHECK (timeout_ms > 0),
    state           text NOT NULL CHECK (state IN ('active', 'paused')),
    held_until      bigint,
    secret          text NOT NULL,
    previous_secret text,
    previous_until  bigint,
    created_at      bigint NOT NULL,
    modified_at     bigint NOT NULL,
    version         bigint NOT NULL DEFAULT 0
);

-- The subscription's concurrency, shared by every node: slot k of a subscription is held
-- by at most one node at a time, until `expires_at` (renewed while the node lives), and a
-- node pushes at most as many messages at once as it holds slots. A node that dies
-- loses its slots when their lease runs out.
CREATE TABLE push_slots (
    subscription_id bigint NOT NULL,
    slot            bigint NOT NULL,
    holder          text,
    expires_at      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (subscription_id, slot)
);

-- The last failures of each subscription (the console shows them), trimmed as they come.
CREATE TABLE push_failures (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscription_id bigint NOT NULL,
    at              bigint NOT NULL,
    message_id      text NOT NULL,
    status          bigint,
    error           text NOT NULL
);
CREATE INDEX push_failures_recent ON push_failures (subscription_id, id);
