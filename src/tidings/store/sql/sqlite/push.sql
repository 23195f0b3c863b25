-- Push subscriptions (`store/push.py`; the tables: 0017_push_subscriptions.sql).

-- name: push_insert
INSERT INTO push_subscriptions (queue_id, endpoint, concurrency, rate_per_hour, timeout_ms,
                                state, secret, created_at, modified_at)
VALUES (:queue, :endpoint, :concurrency, :rate, :timeout, :state, :secret, :now, :now)
ON CONFLICT (queue_id) DO NOTHING
RETURNING id;

-- name: push_get
SELECT id, queue_id, endpoint, concurrency, rate_per_hour, timeout_ms, state,
       secret, previous_secret, previous_until, created_at, modified_at, version
FROM push_subscriptions WHERE queue_id = ?;

-- name: push_list
SELECT id, queue_id, endpoint, concurrency, rate_per_hour, timeout_ms, state,
       secret, previous_secret, previous_until, created_at, modified_at, version
FROM push_subscriptions ORDER BY queue_id;

-- name: push_update
-- A compare-and-set on the version the caller read: a write that lost a race to another
-- writes nothing.
UPDATE push_subscriptions
SET endpoint = :endpoint, concurrency = :concurrency, rate_per_hour = :rate,
    timeout_ms = :timeout, state = :state, secret = :secret,
    previous_secret = :previous_secret, previous_until = :previous_until,
    modified_at = :now, version = version + 1
WHERE id = :id AND version = :version;

-- name: push_delete
DELETE FROM push_subscriptions WHERE queue_id = ? RETURNING id;

-- name: push_delete_slots
DELETE FROM push_slots WHERE subscription_id = ?;

-- name: push_delete_failures
DELETE FROM push_failures WHERE subscription_id = ?;


-- name: push_add_slot
INSERT INTO push_slots (subscription_id, slot) VALUES (?, ?)
ON CONFLICT (subscription_id, slot) DO NOTHING;

-- name: push_claim_slots
-- Free slots (never held, or their holder's lease ran out) below the concurrency; one
-- statement, and SQLite has one writer, so two nodes never take the same slot.
UPDATE push_slots SET holder = :holder, expires_at = :until
WHERE subscription_id = :sub AND slot IN (
    SELECT slot FROM push_slots
    WHERE subscription_id = :sub AND slot < :concurrency
      AND (holder IS NULL OR expires_at <= :now)
    ORDER BY slot LIMIT :want)
RETURNING slot;

-- name: push_renew_slots
-- The holder's slots whose lease has not run out and that are still below the
-- concurrency (a lowered concurrency takes the slots above it back at the next renewal).
UPDATE push_slots SET expires_at = :until
WHERE subscription_id = :sub AND holder = :holder AND expires_at > :now
  AND slot < :concurrency
RETURNING slot;

-- name: push_release_slots
UPDATE push_slots SET holder = NULL, expires_at = 0
WHERE subscription_id = :sub AND holder = :holder
  AND slot IN (SELECT value FROM json_each(:slots));

-- name: push_return_message
-- A leased message given back without its receive
-- counting as an attempt (never pushed: a hold for Retry-After, a FIFO follower of a
-- failed message, a shutdown). The lease token stays, so a FIFO group stays blocked
-- behind it until `visible_at`.
UPDATE messages SET visible_at = :visible, receive_count = MAX(receive_count - 1, 0)
WHERE id = :id AND queue_id = :queue AND lease_token = :token;

-- name: push_add_failure
INSERT INTO push_failures (subscription_id, at, message_id, status, error)
VALUES (?, ?, ?, ?, ?);

-- name: push_trim_failures
DELETE FROM push_failures
WHERE subscription_id = :sub AND id <= (
    SELECT id FROM push_failures WHERE subscription_id = :sub
    ORDER BY id DESC LIMIT 1 OFFSET :keep);

-- name: push_failures
SELECT at, message_id, status, error FROM push_failures
WHERE subscription_id = ? ORDER BY id DESC LIMIT ?;
