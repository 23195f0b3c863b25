-- Push subscriptions (`store/push.py`; the tables: 0017_push_subscriptions.sql).

-- name: push_insert
INSERT INTO push_subscriptions (queue_id, endpoint, concurrency, rate_per_hour, timeout_ms,
                                state, secret, created_at, modified_at)
VALUES (%(queue)s, %(endpoint)s, %(concurrency)s, %(rate)s, %(timeout)s, %(state)s,
        %(secret)s, %(now)s, %(now)s)
ON CONFLICT (queue_id) DO NOTHING
RETURNING id;

-- name: push_get
SELECT id, queue_id, endpoint, concurrency, rate_per_hour, timeout_ms, state,
       secret, previous_secret, previous_until, created_at, modified_at, version
FROM push_subscriptions WHERE queue_id = %s;

-- name: push_list
SELECT id, queue_id, endpoint, concurrency, rate_per_hour, timeout_ms, state,
       secret, previous_secret, previous_until, created_at, modified_at, version
FROM push_subscriptions ORDER BY queue_id;

-- name: push_update
-- A compare-and-set on the version the caller read: a write that lost a race to another
-- writes nothing.
UPDATE push_subscriptions
SET endpoint = %(endpoint)s, concurrency = %(concurrency)s, rate_per_hour = %(rate)s,
    timeout_ms = %(timeout)s, state = %(state)s,
    secret = %(secret)s, previous_secret = %(previous_secret)s,
    previous_until = %(previous_until)s, modified_at = %(now)s, version = version + 1
WHERE id = %(id)s AND version = %(version)s;

-- name: push_delete
DELETE FROM push_subscriptions WHERE queue_id = %s RETURNING id;

-- name: push_delete_slots
DELETE FROM push_slots WHERE subscription_id = %s;

-- name: push_delete_failures
DELETE FROM push_failures WHERE subscription_id = %s;


-- name: push_add_slot
INSERT INTO push_slots (subscription_id, slot) VALUES (%s, %s)
ON CONFLICT (subscription_id, slot) DO NOTHING;

-- name: push_claim_slots
-- Free slots (never held, or their holder's lease ran out) below the concurrency. SKIP
-- LOCKED: two nodes claiming at once take different rows, and the row lock makes the
-- "free" check and the write one step. MATERIALIZED: the pick runs exactly once (see
-- receive_simple).
WITH picked AS MATERIALIZED (
    SELECT subscription_id, slot FROM push_slots
    WHERE subscription_id = %(sub)s AND slot < %(concurrency)s
      AND (holder IS NULL OR expires_at <= %(now)s)
    ORDER BY slot LIMIT %(want)s
    FOR UPDATE SKIP LOCKED)
UPDATE push_slots AS s SET holder = %(holder)s, expires_at = %(until)s
FROM picked WHERE s.subscription_id = picked.subscription_id AND s.slot = picked.slot
RETURNING s.slot;

-- name: push_renew_slots
-- The holder's slots whose lease has not run out and that are still below the
-- concurrency (a lowered concurrency takes the slots above it back at the next renewal).
UPDATE push_slots SET expires_at = %(until)s
WHERE subscription_id = %(sub)s AND holder = %(holder)s AND expires_at > %(now)s
  AND slot < %(concurrency)s
RETURNING slot;

-- name: push_release_slots
UPDATE push_slots SET holder = NULL, expires_at = 0
WHERE subscription_id = %(sub)s AND holder = %(holder)s AND slot = ANY(%(slots)s);

-- name: push_return_message
-- A leased message given back without its receive
-- counting as an attempt (never pushed: a hold for Retry-After, a FIFO follower of a
-- failed message, a shutdown). The lease token stays, so a FIFO group stays blocked
-- behind it until `visible_at`.
UPDATE messages SET visible_at = %(visible)s,
    receive_count = GREATEST(receive_count - 1, 0)
WHERE id = %(id)s AND queue_id = %(queue)s AND lease_token = %(token)s;

-- name: push_add_failure
INSERT INTO push_failures (subscription_id, at, message_id, status, error)
VALUES (%s, %s, %s, %s, %s);

-- name: push_trim_failures
DELETE FROM push_failures
WHERE subscription_id = %(sub)s AND id <= (
    SELECT id FROM push_failures WHERE subscription_id = %(sub)s
    ORDER BY id DESC LIMIT 1 OFFSET %(keep)s);

-- name: push_failures
SELECT at, message_id, status, error FROM push_failures
WHERE subscription_id = %s ORDER BY id DESC LIMIT %s;
