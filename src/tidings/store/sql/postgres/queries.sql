-- Named queries of the PostgreSQL driver; each block starts with "-- name: <name>".
-- The names and the order of their parameters are the same as SQLite's, so `SqlStore`
-- runs either file. All values are bound parameters (%s, psycopg 3); a list travels as one
-- array. Statements run by `run_each` take each column of their rows as an array (unnest)
-- and return the key (the first columns) of every row they changed. Text is ordered with
-- COLLATE "C" (code-point order), as SQLite orders it, whatever the database's collation.

-- ---------------------------------------------------------------------------------------
-- migrations and plumbing

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version bigint PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL);

-- name: applied_migrations
SELECT version, name FROM schema_migrations;

-- name: schema_mark
SELECT COUNT(*), MAX(version) FROM schema_migrations;

-- name: table_exists
-- Resolved through the search_path, as the unqualified names of every other query are.
SELECT (to_regclass(%s) IS NOT NULL)::int;

-- name: record_migration
INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s);

-- name: savepoint
SAVEPOINT bulk;

-- name: release_savepoint
RELEASE SAVEPOINT bulk;

-- name: rollback_to_savepoint
ROLLBACK TO SAVEPOINT bulk;

-- name: lock
-- Transaction-scoped: released with the transaction, also when its node dies.
SELECT pg_advisory_xact_lock(%s);

-- name: try_lock
-- Scoped to the schema, which is one tidings database: nodes of another tidings sharing
-- the PostgreSQL database (another schema) neither wait for it nor skip their own
-- maintenance because of it. (The key is a 32-bit one: MAINTENANCE_LOCK.)
SELECT pg_try_advisory_xact_lock(%s, hashtext(current_schema()));

-- name: notify
-- Delivered at commit to every node's PostgresNotifier, on the channel of this schema
-- (notify/postgres.py: CHANNEL_OF_SCHEMA, the same expression).
SELECT pg_notify('tidings_' || substr(md5(current_schema()), 1, 16), %s);

-- name: current_schema
-- Where tidings' tables are, and whose database: what an application's own connection
-- must reach to send in its transaction.
SELECT current_schema(), current_database(), current_setting('search_path');

-- name: set_search_path
SELECT set_config('search_path', %s, true);

-- name: ping
SELECT 1;

-- name: get_meta
SELECT value FROM meta WHERE key = %s;

-- name: put_meta_if_absent
INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING;

-- name: put_meta
INSERT INTO meta (key, value) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- ---------------------------------------------------------------------------------------
-- queues

-- name: insert_queue
INSERT INTO queues (name, fifo, attributes, created_at, modified_at)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (name) DO NOTHING
RETURNING id;

-- name: queue_by_name
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues WHERE name = %s;

-- name: queue_by_id
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues WHERE id = %s;

-- name: list_queues
-- Prefix match by range, [prefix, prefix + U+10FFFF), then keyset after the last name.
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues
WHERE name COLLATE "C" >= %s AND name COLLATE "C" < %s AND name COLLATE "C" > %s
ORDER BY name COLLATE "C" LIMIT %s;

-- name: dead_letter_sources
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues
WHERE (attributes::jsonb -> 'redrive_policy' ->> 'dead_letter_queue') = %s ORDER BY name;

-- name: update_queue
UPDATE queues SET attributes = %s, modified_at = %s WHERE name = %s;

-- name: delete_queue
DELETE FROM queues WHERE id = %s;

-- name: delete_queue_messages
DELETE FROM messages WHERE queue_id = %s;

-- name: delete_queue_dedup
DELETE FROM fifo_dedup WHERE queue_id = %s;

-- name: delete_queue_jobs
DELETE FROM job_keys WHERE queue_id = %s;

-- name: delete_queue_counts
DELETE FROM queue_counts WHERE queue_id = %s;

-- name: set_purged_at
UPDATE queues SET purged_at = %s WHERE id = %s;

-- name: add_count
-- (queue, shard, n): every node adds to a random shard row, so concurrent sends and
-- deletes do not queue up behind one hot row lock.
INSERT INTO queue_counts (queue_id, shard, n) VALUES (%s, %s, %s)
ON CONFLICT (queue_id, shard) DO UPDATE SET n = queue_counts.n + excluded.n;

-- name: queue_total
SELECT COALESCE(SUM(n), 0) FROM queue_counts WHERE queue_id = %s;

-- name: not_visible_counts
SELECT COUNT(*) FILTER (WHERE lease_token IS NOT NULL), COUNT(*) FILTER (WHERE lease_token IS NULL)
FROM messages WHERE queue_id = %s AND visible_at > %s;

-- ---------------------------------------------------------------------------------------
-- messages

-- name: find_dedup
SELECT message_id, sequence_number FROM fifo_dedup
WHERE queue_id = %s AND deduplication_id = %s AND expires_at > %s;

-- name: put_dedup
INSERT INTO fifo_dedup (queue_id, deduplication_id, message_id, sequence_number, expires_at)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (queue_id, deduplication_id) DO UPDATE SET
    message_id = excluded.message_id, sequence_number = excluded.sequence_number,
    expires_at = excluded.expires_at;

-- name: insert_message
INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
                      visible_at, sent_at, expires_at, group_id, deduplication_id,
                      scheduled_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: insert_message_returning
-- FIFO sends need the row id: it is the message's SequenceNumber.
INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
                      visible_at, sent_at, expires_at, group_id, deduplication_id,
                      scheduled_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id;

-- name: insert_messages_unnest
-- A firing batch's messages in a pass's pipelined completion (where COPY cannot run): one
-- statement, the columns as arrays, the queue id bound once.
INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
                      visible_at, sent_at, expires_at, group_id, deduplication_id,
                      scheduled_at)
SELECT %b, m.* FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[],
                           %b::bigint[], %b::bigint[], %b::bigint[], %b::text[],
                           %b::text[], %b::bigint[]) AS m;

-- name: copy_messages
-- The bulk path for a firing batch's messages.
COPY messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
               visible_at, sent_at, expires_at, group_id, deduplication_id, scheduled_at)
FROM STDIN;

-- name: send_messages
-- A standard queue's whole send in one statement (data-modifying CTEs all run): the rows,
-- the counter and the wake-up. Binary parameters: the arrays travel with no text escaping
-- of the bodies.
WITH sent AS (
    INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
                          visible_at, sent_at, expires_at, group_id)
    SELECT %b, m.message_id, m.body, m.md5_body, m.attributes, m.md5_attributes,
           m.visible_at, m.sent_at, m.expires_at, m.group_id
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[],
                %b::bigint[], %b::bigint[], %b::text[])
         AS m(message_id, body, md5_body, attributes, md5_attributes, visible_at, sent_at,
              expires_at, group_id)
    RETURNING 1
), counted AS (
    INSERT INTO queue_counts (queue_id, shard, n)
    SELECT %b, %b, COUNT(*) FROM sent
    ON CONFLICT (queue_id, shard) DO UPDATE SET n = queue_counts.n + excluded.n
)
SELECT pg_notify('tidings_' || substr(md5(current_schema()), 1, 16), %b);

-- name: receive_simple
-- A standard queue without a redrive policy: one statement. SKIP LOCKED: concurrent
-- receivers on other nodes take other rows instead of waiting. The rows are picked in a
-- MATERIALIZED CTE, which runs exactly once (`picked` below, likewise in
-- expire_messages): written `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`, the
-- planner may run the subquery again (as the inner side of a join), and each run can lock
-- other rows, so one receive leased more than n (bench/soak.py: a MaxNumberOfMessages=10
-- receive returned more than 10 messages).
WITH picked AS MATERIALIZED (
    SELECT id FROM messages
    WHERE queue_id = %(queue)b AND visible_at <= %(now)b AND expires_at > %(now)b
    ORDER BY visible_at LIMIT %(limit)b
    FOR UPDATE SKIP LOCKED)
UPDATE messages AS m
SET visible_at = %(until)b, lease_token = %(token)b, receive_count = m.receive_count + 1,
    first_received_at = COALESCE(m.first_received_at, %(now)b)
FROM picked WHERE m.id = picked.id
RETURNING m.id, m.lease_token, m.message_id, m.body, m.md5_body, m.attributes,
          m.md5_attributes, m.receive_count, m.first_received_at, m.sent_at, m.visible_at,
          m.group_id, m.deduplication_id, m.source_queue_id, m.last_error, m.scheduled_at;

-- name: receive_candidates
SELECT id, receive_count FROM messages
WHERE queue_id = %(queue)s AND visible_at <= %(now)s AND expires_at > %(now)s
ORDER BY visible_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: receive_candidates_fifo
-- A group with any message in flight is skipped whole. FIFO receives of one queue are
-- serialised by an advisory lock (see `SqlQueues.receive_messages`), so this check
-- cannot race another node's receive.
SELECT m.id, m.receive_count FROM messages AS m
WHERE m.queue_id = %(queue)s AND m.visible_at <= %(now)s AND m.expires_at > %(now)s
  AND NOT EXISTS (
      SELECT 1 FROM messages AS b
      WHERE b.queue_id = m.queue_id AND b.group_id = m.group_id
        AND b.visible_at > %(now)s AND b.lease_token IS NOT NULL)
ORDER BY m.id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: lease_messages
UPDATE messages
SET visible_at = %s, lease_token = %s, receive_count = receive_count + 1,
    first_received_at = COALESCE(first_received_at, %s)
WHERE id = ANY(%s) AND visible_at <= %s
RETURNING id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
          receive_count, first_received_at, sent_at, visible_at, group_id, deduplication_id,
          source_queue_id, last_error, scheduled_at;

-- name: dead_letter_messages
-- maxReceiveCount reached: the message starts a new life in the DLQ, visible at once, its
-- retention still counted from the original send (as SQS does for standard queues).
UPDATE messages
SET queue_id = %s, source_queue_id = queue_id, visible_at = %s, lease_token = NULL,
    receive_count = 0, first_received_at = NULL, expires_at = GREATEST(sent_at + %s, sent_at)
WHERE id = ANY(%s);

-- name: reject_message
-- (id, lease token, queue, error, DLQ, now, DLQ retention)[]: a poison message goes to the
-- DLQ at once, guarded by its receipt's lease like a delete.
UPDATE messages AS m
SET queue_id = r.dlq, source_queue_id = m.queue_id, visible_at = r.now, lease_token = NULL,
    receive_count = 0, first_received_at = NULL,
    expires_at = GREATEST(m.sent_at + r.retention, m.sent_at), last_error = r.error
FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::bigint[], %s::bigint[],
            %s::bigint[]) AS r(id, token, queue_id, error, dlq, now, retention)
WHERE m.id = r.id AND m.queue_id = r.queue_id AND m.lease_token = r.token
RETURNING m.id, r.token;

-- name: delete_messages
-- The delete of a batch of receipts and its count in one statement (committing on its
-- own); RETURNING says which went.
WITH gone AS (
    DELETE FROM messages AS m
    USING unnest(%b::bigint[], %b::bigint[]) AS r(id, token)
    WHERE m.id = r.id AND m.queue_id = %b AND m.lease_token = r.token
    RETURNING m.id, r.token
), counted AS (
    INSERT INTO queue_counts (queue_id, shard, n)
    SELECT %b, %b, -COUNT(*) FROM gone HAVING COUNT(*) > 0
    ON CONFLICT (queue_id, shard) DO UPDATE SET n = queue_counts.n + excluded.n
)
SELECT id, token FROM gone;

-- name: change_visibility
-- (id, lease token, visible at, error, queue, now)[]: only while in flight on this lease.
UPDATE messages AS m SET visible_at = c.visible_at, last_error = COALESCE(c.error, m.last_error)
FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::bigint[], %s::bigint[])
     AS c(id, token, visible_at, error, queue_id, now)
WHERE m.id = c.id AND m.queue_id = c.queue_id AND m.lease_token = c.token
  AND m.visible_at > c.now
RETURNING m.id, c.token;

-- name: finish_jobs
-- A group of acknowledgements in one statement (committing on its own): delete each
-- message its receipt still holds, mark every key done, adjust the count.
WITH acks AS (
    SELECT * FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(keys)b::text[])
    AS a(id, token, job_key)
), gone AS (
    DELETE FROM messages AS m USING acks
    WHERE m.id = acks.id AND m.queue_id = %(queue)b AND m.lease_token = acks.token
    RETURNING m.id, acks.token
), finished AS (
    INSERT INTO job_keys (queue_id, job_key, state, done_at)
    SELECT DISTINCT %(queue)b::bigint, job_key, 'done', %(now)b::bigint FROM acks
    ON CONFLICT (queue_id, job_key) DO UPDATE SET
        state = 'done', done_at = excluded.done_at, lease_token = NULL, lease_until = NULL
), counted AS (
    INSERT INTO queue_counts (queue_id, shard, n)
    SELECT %(queue)b, %(shard)b, -COUNT(*) FROM gone HAVING COUNT(*) > 0
    ON CONFLICT (queue_id, shard) DO UPDATE SET n = queue_counts.n + excluded.n
)
SELECT id, token FROM gone;

-- name: reserve_job_keys
-- A group of reservations in one statement: each key is taken where it has no row or
-- its holder's lease ran out; the outer SELECT sees the rows as they were before, so a
-- key not taken says why (done, or running elsewhere).
WITH j AS (
    SELECT * FROM unnest(%(keys)b::text[], %(tokens)b::bigint[]) AS j(job_key, token)
), got AS (
    INSERT INTO job_keys (queue_id, job_key, state, lease_token, lease_until)
    SELECT %(queue)b, job_key, 'running', token, %(until)b FROM j
    ON CONFLICT (queue_id, job_key) DO UPDATE SET
        lease_token = excluded.lease_token, lease_until = excluded.lease_until
    WHERE job_keys.state = 'running' AND job_keys.lease_until <= %(now)b
    RETURNING job_key
)
SELECT j.job_key, got.job_key IS NOT NULL, k.state
FROM j LEFT JOIN got USING (job_key)
LEFT JOIN job_keys AS k ON k.queue_id = %(queue)b AND k.job_key = j.job_key;

-- name: extend_job
-- (job key, queue, token, until)[]
UPDATE job_keys AS k SET lease_until = j.lease_until
FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[])
     AS j(job_key, queue_id, token, lease_until)
WHERE k.queue_id = j.queue_id AND k.job_key = j.job_key AND k.state = 'running'
  AND k.lease_token = j.token
RETURNING k.job_key;

-- name: release_job
-- (job key, queue, token)[]
DELETE FROM job_keys AS k
USING unnest(%s::text[], %s::bigint[], %s::bigint[]) AS j(job_key, queue_id, token)
WHERE k.queue_id = j.queue_id AND k.job_key = j.job_key AND k.state = 'running'
  AND k.lease_token = j.token
RETURNING k.job_key;

-- name: peek_messages
-- In receive order (messages_ready), keyset-paged; the columns a receive returns.
SELECT id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
       receive_count, first_received_at, sent_at, visible_at, group_id, deduplication_id,
       source_queue_id, last_error, scheduled_at
FROM messages
WHERE queue_id = %(queue)s AND (visible_at, id) > (%(after_visible)s, %(after_id)s)
ORDER BY visible_at, id LIMIT %(limit)s;

-- name: cancel_message
-- A delayed message withdrawn by its sender (a task handle's cancel): found through the
-- (queue_id, visible_at) index by the instant it was sent for; only while still delayed
-- (never leased, not yet visible), so a job already running is never pulled away.
DELETE FROM messages
WHERE queue_id = %s AND visible_at = %s AND message_id = %s AND visible_at > %s
  AND lease_token IS NULL
RETURNING id;

-- name: next_visible_at
SELECT MIN(visible_at) FROM messages WHERE queue_id = %s AND visible_at > %s;

-- name: expire_messages
-- (now, limit): at most `limit`, picked once (see receive_simple).
WITH picked AS MATERIALIZED (
    SELECT id FROM messages WHERE expires_at <= %s ORDER BY expires_at LIMIT %s
    FOR UPDATE SKIP LOCKED)
DELETE FROM messages AS m USING picked WHERE m.id = picked.id
RETURNING m.queue_id;

-- name: expire_dedup
DELETE FROM fifo_dedup WHERE expires_at <= %s;

-- name: forget_done_jobs
-- By ctid: a TID scan of the rows the subquery found whatever the planner's statistics say
-- (with autovacuum off nothing ANALYZEs the table, and the (queue_id, job_key) IN form was
-- once planned into a minutes-long join over 100,000 rows).
DELETE FROM job_keys WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM job_keys WHERE done_at < %s LIMIT %s));

-- name: forget_lapsed_jobs
-- Reservations of consumers that died: their lease ran out long ago.
DELETE FROM job_keys WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM job_keys WHERE state = 'running' AND lease_until < %s LIMIT %s));

-- name: movable_messages
SELECT id, source_queue_id FROM messages WHERE queue_id = %s ORDER BY id LIMIT %s
FOR UPDATE SKIP LOCKED;

-- name: movable_message
SELECT id, source_queue_id FROM messages WHERE queue_id = %s AND id = %s FOR UPDATE;

-- name: move_message
UPDATE messages
SET queue_id = %s, visible_at = %s, lease_token = NULL, receive_count = 0,
    first_received_at = NULL, source_queue_id = NULL
WHERE id = %s;

-- ---------------------------------------------------------------------------------------
-- message move tasks

-- name: insert_move_task
INSERT INTO move_tasks (handle, source_queue_id, destination_queue_id, max_per_second, status,
                        moved, to_move, started_at, failure_reason)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: list_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE source_queue_id = %s
ORDER BY started_at DESC, seq DESC LIMIT %s;

-- name: active_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE status = 'RUNNING' ORDER BY started_at;

-- name: add_move_task_progress
UPDATE move_tasks SET moved = moved + %s WHERE handle = %s;

-- name: set_move_task_status
-- Compare-and-set on the status the caller read.
UPDATE move_tasks SET status = %s, failure_reason = COALESCE(%s, failure_reason)
WHERE handle = %s AND status = %s;

-- ---------------------------------------------------------------------------------------
-- schedules

-- name: insert_group
INSERT INTO schedule_groups (name, created_at, modified_at, tags, client_token)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (name) DO NOTHING;

-- name: group_by_name
SELECT name, created_at, modified_at, tags, client_token FROM schedule_groups WHERE name = %s;

-- name: list_groups
SELECT name, created_at, modified_at, tags, client_token FROM schedule_groups
WHERE name COLLATE "C" >= %s AND name COLLATE "C" < %s AND name COLLATE "C" > %s
ORDER BY name COLLATE "C" LIMIT %s;

-- name: delete_group
DELETE FROM schedule_groups WHERE name = %s;

-- name: update_group_tags
UPDATE schedule_groups SET tags = %s, modified_at = %s WHERE name = %s;

-- name: delete_group_schedules
DELETE FROM schedules WHERE group_name = %s;

-- name: stage_schedules
-- Bulk creation goes through COPY into a per-session staging table (the fastest way into
-- PostgreSQL), then one INSERT … SELECT that skips existing (group, name) pairs.
CREATE TEMP TABLE IF NOT EXISTS schedules_in (
    group_name text, name text, state text, expression text, timezone text, start_at bigint,
    end_at bigint, flex_minutes integer, target text, action_after_completion text,
    description text, client_token text, next_fire_at bigint, due_at bigint,
    created_at bigint, modified_at bigint
) ON COMMIT DELETE ROWS;

-- name: copy_schedules
COPY schedules_in FROM STDIN (FORMAT BINARY);

-- name: insert_staged_schedules
INSERT INTO schedules (group_name, name, state, expression, timezone, start_at, end_at,
                       flex_minutes, target, action_after_completion, description, client_token,
                       next_fire_at, due_at, created_at, modified_at)
SELECT group_name, name, state, expression, timezone, start_at, end_at, flex_minutes, target,
       action_after_completion, description, client_token, next_fire_at, due_at, created_at,
       modified_at
FROM schedules_in
ON CONFLICT (group_name, name) DO NOTHING;

-- name: insert_schedule
-- ScheduleRow's columns, each as an array; returns the (group, name) of the rows that went in.
INSERT INTO schedules (group_name, name, state, expression, timezone, start_at, end_at,
                       flex_minutes, target, action_after_completion, description, client_token,
                       next_fire_at, due_at, created_at, modified_at)
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                     %s::bigint[], %s::bigint[], %s::integer[], %s::text[], %s::text[],
                     %s::text[], %s::text[], %s::bigint[], %s::bigint[], %s::bigint[],
                     %s::bigint[])
ON CONFLICT (group_name, name) DO NOTHING
RETURNING group_name, name;

-- name: create_schedule
-- One create in one statement (ScheduleRow's columns, then the group again): only into an
-- existing group, nothing when the name is taken; its id comes back.
INSERT INTO schedules (group_name, name, state, expression, timezone, start_at, end_at,
                       flex_minutes, target, action_after_completion, description, client_token,
                       next_fire_at, due_at, created_at, modified_at)
SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s
WHERE EXISTS (SELECT 1 FROM schedule_groups WHERE name = %s)
ON CONFLICT (group_name, name) DO NOTHING
RETURNING id;

-- name: schedule_by_name
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules WHERE group_name = %s AND name = %s;

-- name: list_schedules
-- Every group, keyset-paged by (group, name) after the last row of the previous page.
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules
WHERE name COLLATE "C" >= %(lo)s AND name COLLATE "C" < %(hi)s
  AND (%(state)s::text IS NULL OR state = %(state)s)
  AND (group_name COLLATE "C", name COLLATE "C") > (%(after_group)s, %(after_name)s)
ORDER BY group_name COLLATE "C", name COLLATE "C" LIMIT %(limit)s;

-- name: list_group_schedules
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules
WHERE group_name = %(group)s AND name COLLATE "C" >= %(lo)s AND name COLLATE "C" < %(hi)s
  AND name COLLATE "C" > %(after_name)s AND (%(state)s::text IS NULL OR state = %(state)s)
ORDER BY name COLLATE "C" LIMIT %(limit)s;

-- name: replace_schedule
UPDATE schedules
SET state = %s, expression = %s, timezone = %s, start_at = %s, end_at = %s, flex_minutes = %s,
    target = %s, action_after_completion = %s, description = %s, next_fire_at = %s, due_at = %s,
    modified_at = %s, version = version + 1
WHERE group_name = %s AND name = %s;

-- name: delete_schedule
DELETE FROM schedules WHERE group_name = %s AND name = %s;

-- name: next_due_at
SELECT MIN(due_at) FROM schedules WHERE due_at IS NOT NULL;

-- name: warm_due
-- (from, until, limit) → (rows, the last one's due_at, …): read what firing the schedules
-- due in [from, until) will touch, ahead of their due instant (`Store.warm_due`): each
-- row, its entry in the (group_name, name) index (the delete of a one-shot updates it)
-- and its place in the firings history index (the firing appends there). The lookups
-- are selected, not filtered on, so that each runs for every row.
SELECT COUNT(*), MAX(s.due_at),
       SUM(CASE WHEN EXISTS (SELECT 1 FROM schedules n
                             WHERE n.group_name = s.group_name AND n.name = s.name)
                THEN 1 ELSE 0 END),
       SUM(CASE WHEN EXISTS (SELECT 1 FROM firings f WHERE f.schedule_id = s.id)
                THEN 1 ELSE 0 END)
FROM (SELECT id, group_name, name, due_at FROM schedules
      WHERE due_at >= %s AND due_at < %s ORDER BY due_at LIMIT %s) AS s;

-- name: lock_due
-- (hold, now, limit) A firing pass's claim (`Store.firing_pass`): the rows are locked in the
-- pass's transaction, not marked. SKIP LOCKED: other nodes' passes take other rows; a pass
-- that fails (or a node killed) rolls back, leaving its rows as they were, due at once.
-- The completion (`delete_fired_schedule` / `advance_schedule`) runs in the same
-- transaction. `hold` is the transaction's idle limit, set in the same round trip: a pass
-- whose node stalls (paused, swapped out) is ended by the server, so its rows go to another
-- node.
WITH hold AS MATERIALIZED (
    SELECT set_config('idle_in_transaction_session_timeout', %s, true))
SELECT s.id, s.group_name, s.name, s.state, s.expression, s.timezone, s.start_at, s.end_at,
       s.flex_minutes, s.target, s.action_after_completion, s.description, s.client_token,
       s.next_fire_at, s.due_at, s.last_fired_at, s.created_at, s.modified_at, s.version
FROM schedules AS s WHERE s.due_at <= %s AND EXISTS (SELECT FROM hold)
ORDER BY s.due_at LIMIT %s
FOR UPDATE OF s SKIP LOCKED;

-- name: advance_schedule
-- (id, version, occurrence, next fire at, due at, fired at)[]: a firing pass's completion
-- of the rows it locked (`lock_due`): a compare-and-set on the version the pass read
-- (every write adds one) and the occurrence the firing was planned for (the rows whose
-- ids come back held).
UPDATE schedules AS s
SET next_fire_at = v.next_fire_at, due_at = v.due_at,
    last_fired_at = COALESCE(v.fired_at, s.last_fired_at), version = s.version + 1
FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
            %s::bigint[]) AS v(id, version, occurrence, next_fire_at, due_at, fired_at)
WHERE s.id = v.id AND s.version = v.version AND s.next_fire_at = v.occurrence
RETURNING s.id;

-- name: delete_fired_schedule
-- (id, version, occurrence)[]: `advance_schedule` for one-shots that delete themselves
DELETE FROM schedules AS s
USING unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS v(id, version, occurrence)
WHERE s.id = v.id AND s.version = v.version AND s.next_fire_at = v.occurrence
RETURNING s.id;

-- name: count_schedules
SELECT COUNT(*) FROM schedules;

-- name: disabled_schedules
SELECT name, next_fire_at, flex_minutes FROM schedules
WHERE group_name = %s AND state = 'DISABLED' AND name COLLATE "C" > %s
ORDER BY name COLLATE "C" LIMIT %s;

-- name: schedule_state_counts
SELECT state, COUNT(*) FROM schedules WHERE group_name = %s GROUP BY state;

-- name: firings_by_due
SELECT due_at / %s, target::json ->> 'kind', COUNT(*) FROM schedules
WHERE due_at >= %s AND due_at < %s GROUP BY 1, 2;

-- name: firings_by_due_destination
-- (bucket, start, end): the forecast's limited keys (a queue's, a host's, a function's):
-- due firings per bucket, target kind and destination.
SELECT due_at / %s, target::json ->> 'kind', target::json ->> 'destination', COUNT(*)
FROM schedules WHERE due_at >= %s AND due_at < %s GROUP BY 1, 2, 3;

-- name: group_firings_by_due_destination
-- `firings_by_due_destination` of one group (a campaign).
SELECT due_at / %(bucket)s, target::json ->> 'kind', target::json ->> 'destination', COUNT(*)
FROM schedules WHERE group_name = %(group)s AND due_at >= %(lo)s AND due_at < %(hi)s
GROUP BY 1, 2, 3;

-- name: firings_by_due_input
-- The forecast's keys read from inputs (a recipient's domain): due firings of one kind
-- per bucket and input text (of one group when %(group)s is not null); the key is read in Python.
SELECT due_at / %(bucket)s, target::json ->> 'input', COUNT(*) FROM schedules
WHERE due_at >= %(lo)s AND due_at < %(hi)s AND target::json ->> 'kind' = %(kind)s
    AND (%(group)s::text IS NULL OR group_name = %(group)s)
GROUP BY 1, 2;

-- name: firings_by_occurrence
SELECT next_fire_at / %s, target::json ->> 'kind', COUNT(*) FROM schedules
WHERE due_at IS NOT NULL AND next_fire_at >= %s AND next_fire_at < %s GROUP BY 1, 2;

-- ---------------------------------------------------------------------------------------
-- email

-- name: insert_template
INSERT INTO email_templates (name, subject, html, text, created_at, modified_at)
VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING;

-- name: update_template
UPDATE email_templates SET subject = %s, html = %s, text = %s, modified_at = %s WHERE name = %s;

-- name: template_by_name
SELECT name, subject, html, text, created_at, modified_at FROM email_templates
WHERE name = %s;

-- name: list_templates
SELECT name, subject, html, text, created_at, modified_at FROM email_templates
WHERE name COLLATE "C" > %s ORDER BY name COLLATE "C" LIMIT %s;

-- name: delete_template
DELETE FROM email_templates WHERE name = %s;

-- name: put_suppression
-- (address, reason, created at)[]. The first reason stays: re-adding an address keeps
-- when and why it was first suppressed.
INSERT INTO suppressions (address, reason, created_at)
SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[])
ON CONFLICT (address) DO NOTHING
RETURNING address;

-- name: delete_suppression
DELETE FROM suppressions WHERE address = %s;

-- name: suppressed_among
SELECT address, reason, created_at FROM suppressions WHERE address = ANY(%s);

-- name: list_suppressions
SELECT address, reason, created_at FROM suppressions
WHERE address COLLATE "C" > %(after)s AND (%(reason)s::text IS NULL OR reason = %(reason)s)
ORDER BY address COLLATE "C" LIMIT %(limit)s;

-- name: insert_delivery
INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, sender,
                              recipients, state, detail, attempts, created_at, updated_at,
                              document)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING
RETURNING seq;

-- name: insert_deliveries
-- A group commit's delivery rows, the columns as arrays: one round trip for the batch (a
-- statement per delivery was a round trip each). Returns (id, seq) of the rows that went
-- in; an id already logged (a retry's QUEUED row) returns nothing and is moved instead.
INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, sender,
                              recipients, state, detail, attempts, created_at, updated_at,
                              document)
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                     %s::text[], %s::text[], %s::text[], %s::text[], %s::integer[],
                     %s::bigint[], %s::bigint[], %s::text[])
ON CONFLICT (id) DO NOTHING
RETURNING id, seq;

-- name: insert_delivery_recipient
-- (address, delivery seq)[]
INSERT INTO email_delivery_recipients (address, delivery_seq)
SELECT * FROM unnest(%s::text[], %s::bigint[])
ON CONFLICT DO NOTHING
RETURNING address;

-- name: update_delivery
-- Compare-and-set on the state the caller read (final states are final).
UPDATE email_deliveries SET state = %s, detail = %s, attempts = GREATEST(attempts, %s),
    updated_at = %s
WHERE id = %s AND state = %s;

-- name: delivery_by_id
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries WHERE id = %s;

-- name: deliveries_by_id
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries WHERE id = ANY(%s);

-- name: list_deliveries
-- Newest first, keyset-paged on seq.
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries
WHERE seq < %(before)s AND (%(state)s::text IS NULL OR state = %(state)s)
ORDER BY seq DESC LIMIT %(limit)s;

-- name: list_recipient_deliveries
SELECT d.seq, d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
       d.recipients, d.state, d.detail, d.attempts, d.created_at, d.updated_at, d.document
FROM email_deliveries AS d JOIN email_delivery_recipients AS r ON r.delivery_seq = d.seq
WHERE r.address = %(address)s AND d.seq < %(before)s
  AND (%(state)s::text IS NULL OR d.state = %(state)s)
ORDER BY d.seq DESC LIMIT %(limit)s;

-- name: find_deliveries
-- The filters of `tidings email resend`; oldest first, keyset-paged on seq.
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries
WHERE seq > %(after)s AND (%(message_id)s::text IS NULL OR message_id = %(message_id)s)
  AND (NOT %(has_prefix)s OR (schedule COLLATE "C" >= %(lo)s AND schedule COLLATE "C" < %(hi)s))
  AND (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(created_from)s::bigint IS NULL OR created_at >= %(created_from)s)
  AND (%(created_until)s::bigint IS NULL OR created_at < %(created_until)s)
ORDER BY seq LIMIT %(limit)s;

-- name: find_recipient_deliveries
SELECT d.seq, d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
       d.recipients, d.state, d.detail, d.attempts, d.created_at, d.updated_at, d.document
FROM email_deliveries AS d JOIN email_delivery_recipients AS r ON r.delivery_seq = d.seq
WHERE r.address = %(address)s AND d.seq > %(after)s
  AND (%(message_id)s::text IS NULL OR d.message_id = %(message_id)s)
  AND (NOT %(has_prefix)s OR (d.schedule COLLATE "C" >= %(lo)s AND d.schedule COLLATE "C" < %(hi)s))
  AND (%(state)s::text IS NULL OR d.state = %(state)s)
  AND (%(created_from)s::bigint IS NULL OR d.created_at >= %(created_from)s)
  AND (%(created_until)s::bigint IS NULL OR d.created_at < %(created_until)s)
ORDER BY d.seq LIMIT %(limit)s;

-- name: delivery_state_counts
SELECT state, COUNT(*) FROM email_deliveries
WHERE schedule COLLATE "C" >= %s AND schedule COLLATE "C" < %s GROUP BY state;

-- ---------------------------------------------------------------------------------------
-- campaigns

-- name: insert_campaign
INSERT INTO campaigns (name, steps, template, status, created_at, modified_at)
VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING;

-- name: campaign_by_name
SELECT name, steps, template, status, rows_read, schedules_created, row_errors, cancelled,
       created_at, modified_at
FROM campaigns WHERE name = %s;

-- name: list_campaigns
SELECT name, steps, template, status, rows_read, schedules_created, row_errors, cancelled,
       created_at, modified_at
FROM campaigns WHERE name COLLATE "C" > %s ORDER BY name COLLATE "C" LIMIT %s;

-- name: update_campaign_steps
UPDATE campaigns SET steps = %s, modified_at = %s WHERE name = %s;

-- name: add_campaign_progress
-- A re-run reads the same rows again: rows read and row errors keep their highest count,
-- while schedules created add up (a re-run only creates what is missing).
UPDATE campaigns SET rows_read = GREATEST(rows_read, %s), row_errors = GREATEST(row_errors, %s),
    schedules_created = schedules_created + %s, modified_at = %s
WHERE name = %s;

-- name: add_campaign_created
-- In the transaction that inserts the schedules: the count cannot drift from the rows.
UPDATE campaigns SET schedules_created = schedules_created + %s WHERE name = %s;

-- name: set_campaign_status
-- Compare-and-set on the status the caller read.
UPDATE campaigns SET status = %s, modified_at = %s WHERE name = %s AND status = %s;

-- name: lock_active_campaign
-- Row lock until commit: a pause or cancel of the campaign waits for this resume page.
SELECT 1 FROM campaigns WHERE name = %s AND status = 'ACTIVE' FOR UPDATE;

-- name: add_campaign_cancelled
UPDATE campaigns SET cancelled = cancelled + %s, modified_at = %s WHERE name = %s;

-- name: disable_group_schedules
UPDATE schedules SET state = 'DISABLED', due_at = NULL, modified_at = %s,
    version = version + 1
WHERE group_name = %s AND state = 'ENABLED';

-- name: enable_schedule
-- (name, due at, now, group)[]
UPDATE schedules AS s SET state = 'ENABLED', due_at = v.due_at, modified_at = v.now,
    version = s.version + 1
FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[]) AS v(name, due_at, now, grp)
WHERE s.group_name = v.grp AND s.name = v.name AND s.state = 'DISABLED'
RETURNING s.name;

-- name: delete_group_schedule
-- (name, group)[]
DELETE FROM schedules AS s
USING unnest(%s::text[], %s::text[]) AS v(name, grp)
WHERE s.group_name = v.grp AND s.name = v.name
RETURNING s.name;

-- ---------------------------------------------------------------------------------------
-- nodes and the console's counts

-- name: put_node
INSERT INTO nodes (id, host, pid, version, started_at, seen_at, activity)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, activity = excluded.activity;

-- name: list_nodes
SELECT id, host, pid, version, started_at, seen_at, activity FROM nodes
WHERE seen_at >= %s ORDER BY started_at, id;

-- name: forget_nodes
DELETE FROM nodes WHERE seen_at < %s;

-- name: put_console_count
INSERT INTO console_counts (name, value, taken_at) VALUES (%s, %s, %s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, taken_at = excluded.taken_at;

-- name: console_counts
SELECT name, value, taken_at FROM console_counts;

-- name: count_pending_schedules
-- Walks the due index only (disabled and completed schedules are not in it).
SELECT COUNT(*) FROM schedules WHERE due_at IS NOT NULL;

-- name: count_due_between
SELECT COUNT(*) FROM schedules WHERE due_at >= %s AND due_at < %s;

-- name: delivery_counts_since
SELECT state, COUNT(*) FROM email_deliveries WHERE created_at >= %s GROUP BY state;

-- name: schedules_by_due
-- Keyset-paged by (due_at, id) along the due index: page 1,000 costs what page 1 does.
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules
WHERE due_at >= %(lo)s AND due_at < %(hi)s AND (due_at, id) > (%(after_due)s, %(after_id)s)
ORDER BY due_at, id LIMIT %(limit)s;

-- security: the audit log and verified email identities

-- name: insert_audit
INSERT INTO audit_log (at, actor, face, action, resource) VALUES (%s, %s, %s, %s, %s);

-- name: list_audit
-- Newest first, keyset-paged on seq.
SELECT seq, at, actor, face, action, resource FROM audit_log
WHERE seq < %(before)s AND (%(actor)s::text IS NULL OR actor = %(actor)s)
ORDER BY seq DESC LIMIT %(limit)s;

-- name: insert_email_identity
INSERT INTO email_identities (identity, created_at) VALUES (%s, %s)
ON CONFLICT (identity) DO NOTHING;

-- name: delete_email_identity
DELETE FROM email_identities WHERE identity = %s;

-- name: list_email_identities
SELECT identity, created_at FROM email_identities ORDER BY identity;

-- name: schedule_keys
-- What a filtered search reads of each schedule it walks past: little, so a scan of
-- thousands stays quick; the matches are then read whole.
SELECT id, group_name, name, state, target, due_at FROM schedules
WHERE name COLLATE "C" >= %(lo)s AND name COLLATE "C" < %(hi)s
  AND (group_name COLLATE "C", name COLLATE "C") > (%(after_group)s, %(after_name)s)
ORDER BY group_name COLLATE "C", name COLLATE "C" LIMIT %(limit)s;

-- name: group_schedule_keys
SELECT id, group_name, name, state, target, due_at FROM schedules
WHERE group_name = %(group)s AND name COLLATE "C" >= %(lo)s AND name COLLATE "C" < %(hi)s
  AND name COLLATE "C" > %(after_name)s
ORDER BY name COLLATE "C" LIMIT %(limit)s;

-- name: due_schedule_keys
SELECT id, group_name, name, state, target, due_at FROM schedules
WHERE due_at >= %(lo)s AND due_at < %(hi)s AND (due_at, id) > (%(after_due)s, %(after_id)s)
ORDER BY due_at, id LIMIT %(limit)s;

-- name: schedule_state_counts_between
-- A campaign step's schedules (names from lo to hi in the campaign's group), by state.
SELECT state, COUNT(*) FROM schedules
WHERE group_name = %s AND name COLLATE "C" >= %s AND name COLLATE "C" < %s GROUP BY state;

-- name: group_firings_by_due
-- One group's (a campaign's) enabled schedules due in [start, end), per bucket.
SELECT due_at / %(bucket)s, COUNT(*) FROM schedules
WHERE group_name = %(group)s AND due_at >= %(lo)s AND due_at < %(hi)s GROUP BY 1;

-- ---------------------------------------------------------------------------------------
-- reclaiming the space of deleted rows (docs/reliability.md, "Long soak")

-- name: reclaim_needed
-- Autovacuum reclaims dead rows by itself; a server with it turned off never does, and
-- the tables that churn (every send, receive, firing) would grow without bound.
SELECT current_setting('autovacuum') <> 'on';

-- name: reclaim_space
-- Only the tables that churn; SKIP_LOCKED: a table another node is vacuuming is skipped.
-- ANALYZE too: nothing else refreshes the planner's statistics on such a server.
-- PARALLEL 0: one process, not a worker per index taking every core at once while the
-- node's firings and receives wait for one (no truncation either: 0013_keep_table_tails).
VACUUM (SKIP_LOCKED, ANALYZE, PARALLEL 0) messages, schedules, queue_counts, job_keys, fifo_dedup, firings;

-- ---------------------------------------------------------------------------------------
-- firing outcomes (the console's schedule page; 0011_firings.sql)

-- name: insert_firings
-- (schedule id, occurrence, at, outcome, attempts, detail)[]: one statement per batch;
-- returns the schedule ids (what run_each reads).
INSERT INTO firings (schedule_id, occurrence, at, outcome, attempts, detail)
SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::integer[],
                     %s::text[])
RETURNING schedule_id;

-- name: recent_firings
SELECT occurrence, at, outcome, attempts, detail FROM firings
WHERE schedule_id = %s AND at >= %s ORDER BY id DESC LIMIT %s;

-- name: firings_trim_bound
-- The first id below the bound young enough to keep: the scan, in id order, stops there,
-- so it reads about as many rows as the trim deletes (at most the bound's).
SELECT id FROM firings WHERE id < %s AND at >= %s ORDER BY id LIMIT 1;

-- name: firings_id_range
SELECT MIN(id), MAX(id) FROM firings;

-- name: trim_firings
DELETE FROM firings WHERE id < %s;

-- ---------------------------------------------------------------------------------------
-- campaign steps' cancelled counts (0012_campaign_step_cancelled.sql)

-- name: delete_group_schedules_between
-- One campaign step's schedules (names from lo to hi in the campaign's group).
DELETE FROM schedules
WHERE group_name = %s AND name COLLATE "C" >= %s AND name COLLATE "C" < %s;

-- name: add_step_cancelled
INSERT INTO campaign_step_counts (campaign, step, cancelled) VALUES (%s, %s, %s)
ON CONFLICT (campaign, step) DO UPDATE
SET cancelled = campaign_step_counts.cancelled + excluded.cancelled;

-- name: step_cancelled_counts
SELECT step, cancelled FROM campaign_step_counts WHERE campaign = %s;

-- name: sent_to_since
-- The per-recipient frequency cap (email/deliverability.py): SENT deliveries to one
-- address since an instant, through the recipients table's (address, delivery_seq) key.
SELECT COUNT(*) FROM email_delivery_recipients AS r
JOIN email_deliveries AS d ON d.seq = r.delivery_seq
WHERE r.address = %(address)s AND d.state = 'SENT' AND d.updated_at >= %(since)s;
-- ---------------------------------------------------------------------------------------
-- contact lists, contacts and returned-mail events (0018)

-- name: insert_contact_list
INSERT INTO contact_lists (name, description, topics, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING;

-- name: contact_list_by_name
SELECT name, description, topics, created_at, updated_at FROM contact_lists WHERE name = %s;

-- name: list_contact_lists
SELECT name, description, topics, created_at, updated_at FROM contact_lists
WHERE name COLLATE "C" > %s ORDER BY name COLLATE "C" LIMIT %s;

-- name: update_contact_list
UPDATE contact_lists SET description = %s, topics = %s, updated_at = %s WHERE name = %s;

-- name: delete_contact_list
DELETE FROM contact_lists WHERE name = %s;

-- name: delete_list_contacts
DELETE FROM contacts WHERE list_name = %s;

-- name: insert_contact
INSERT INTO contacts (list_name, address, preferences, unsubscribe_all, attributes,
                      created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (list_name, address) DO NOTHING;

-- name: update_contact
UPDATE contacts SET preferences = %s, unsubscribe_all = %s, attributes = %s, updated_at = %s
WHERE list_name = %s AND address = %s;

-- name: contact_by_key
SELECT list_name, address, preferences, unsubscribe_all, attributes, created_at, updated_at
FROM contacts WHERE list_name = %s AND address = %s;

-- name: contacts_among
SELECT list_name, address, preferences, unsubscribe_all, attributes, created_at, updated_at
FROM contacts WHERE list_name = %s AND address = ANY(%s);

-- name: list_contacts
SELECT list_name, address, preferences, unsubscribe_all, attributes, created_at, updated_at
FROM contacts WHERE list_name = %s AND address COLLATE "C" > %s
ORDER BY address COLLATE "C" LIMIT %s;

-- name: delete_contact
DELETE FROM contacts WHERE list_name = %s AND address = %s;

-- name: insert_email_event
INSERT INTO email_events (delivery_id, address, kind, source, detail, created_at)
VALUES (%s, %s, %s, %s, %s, %s);

-- name: list_email_events
-- Newest first; %(before)s is the seq of the previous page's last row.
SELECT seq, delivery_id, address, kind, source, detail, created_at FROM email_events
WHERE seq < %(before)s AND (%(delivery_id)s::text IS NULL OR delivery_id = %(delivery_id)s)
  AND (%(address)s::text IS NULL OR address = %(address)s)
ORDER BY seq DESC LIMIT %(limit)s;

-- name: soft_bounce_count
SELECT count(*) FROM email_events WHERE address = %s AND kind = 'SOFT_BOUNCE';

-- name: soft_bounces_since
-- (address, since): the window of TIDINGS_EMAIL_SOFT_BOUNCE_DAYS, on email_events_address.
SELECT count(*) FROM email_events
WHERE address = %s AND kind = 'SOFT_BOUNCE' AND created_at >= %s;

-- name: append_delivery_detail
-- (text, updated at, delivery id): returned mail joins what the log says of its delivery;
-- bounded, since a delivery may hear back many times.
UPDATE email_deliveries
SET detail = substr(coalesce(detail || '; ', '') || %s, 1, 4000), updated_at = %s
WHERE id = %s;

-- name: move_delivery_state
-- (new, updated at, id, current): a compare-and-set that keeps the detail (checked
-- against DELIVERIES by its caller).
UPDATE email_deliveries SET state = %s, updated_at = %s WHERE id = %s AND state = %s;

-- limits (issue 33) ----------------------------------------------------------------------

-- name: limit_settings
SELECT key, rate_count, period_ms, burst, concurrency, source, updated_at FROM limits
ORDER BY key;

-- name: put_limit
-- (key, rate count, period ms, burst, concurrency, source, updated at)
INSERT INTO limits (key, rate_count, period_ms, burst, concurrency, source, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (key) DO UPDATE SET rate_count = excluded.rate_count,
    period_ms = excluded.period_ms, burst = excluded.burst,
    concurrency = excluded.concurrency, source = excluded.source,
    updated_at = excluded.updated_at;

-- name: delete_limit
DELETE FROM limits WHERE key = %s;

-- name: limit_pauses
-- (now): the keys paused beyond now.
SELECT key, paused_until FROM limit_keys WHERE paused_until > %s ORDER BY key;

-- name: ensure_limit_key
INSERT INTO limit_keys (key) VALUES (%s) ON CONFLICT (key) DO NOTHING;

-- name: lock_limit_key
-- The key's row, held until the acquisition commits: nodes take a key's room in turn.
SELECT paused_until, tat FROM limit_keys WHERE key = %s FOR UPDATE;

-- name: limit_key_paused_until
SELECT paused_until FROM limit_keys WHERE key = %s;

-- name: expire_limit_slots
-- (key, now): slots whose lease ran out (their holder died or hung) are free again.
DELETE FROM limit_slots WHERE key = %s AND expires_at <= %s;

-- name: count_limit_slots
SELECT count(*) FROM limit_slots WHERE key = %s;

-- name: expire_limit_starts
-- (key, window start): starts that left the sliding window.
DELETE FROM limit_starts WHERE key = %s AND at_ms <= %s;

-- name: limit_starts
SELECT at_ms FROM limit_starts WHERE key = %s ORDER BY at_ms;

-- name: insert_limit_slot
INSERT INTO limit_slots (key, holder, expires_at) VALUES (%s, %s, %s)
ON CONFLICT (key, holder) DO UPDATE SET expires_at = excluded.expires_at;

-- name: insert_limit_start
INSERT INTO limit_starts (key, at_ms) VALUES (%s, %s);

-- name: set_limit_tat
UPDATE limit_keys SET tat = %s WHERE key = %s;

-- name: release_limit_slot
DELETE FROM limit_slots WHERE key = %s AND holder = %s;

-- name: extend_limit_slot
UPDATE limit_slots SET expires_at = %s WHERE key = %s AND holder = %s;

-- name: pause_limit_key
-- (key, until): a pushback; a later pause already there stands.
INSERT INTO limit_keys (key, paused_until) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET paused_until = GREATEST(
    COALESCE(limit_keys.paused_until, 0), excluded.paused_until);

-- name: set_limit_pause
-- (key, until or NULL): the operator's pause (or resume), as given.
INSERT INTO limit_keys (key, paused_until) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET paused_until = excluded.paused_until;

-- name: limit_slots_in_use
-- (now): live slots by key.
SELECT key, count(*) FROM limit_slots WHERE expires_at > %s GROUP BY key ORDER BY key;

-- name: limit_starts_by_key
-- (since): starts since the instant, by key.
SELECT key, count(*), max(at_ms) FROM limit_starts WHERE at_ms > %s GROUP BY key ORDER BY key;

-- name: forget_limit_rows
-- (before): starts older than any window, slots long expired.
DELETE FROM limit_starts WHERE at_ms < %s;

-- name: forget_limit_slots
DELETE FROM limit_slots WHERE expires_at <= %s;

-- name: hold_back_messages
-- (id, lease token, visible at, error, queue, now)[]: jobs a limit held back go back to
-- their queue until `visible at` without counting as a receive (the receive that leased
-- them added one: taken back here, in the same compare-and-set on the lease). The lease
-- token is negated, so the receipt is spent: it cannot take the count back twice.
UPDATE messages AS m SET visible_at = c.visible_at,
    receive_count = GREATEST(m.receive_count - 1, 0), lease_token = -m.lease_token,
    last_error = COALESCE(c.error, m.last_error)
FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::bigint[], %s::bigint[])
     AS c(id, token, visible_at, error, queue_id, now)
WHERE m.id = c.id AND m.queue_id = c.queue_id AND m.lease_token = c.token
  AND m.visible_at > c.now
RETURNING m.id, c.token;

-- name: wake_held_back
-- (id, lease token, queue, now)[]: jobs held back (their receipt's token negated by
-- hold_back_messages, and not received since) visible now: their limit changed.
UPDATE messages AS m SET visible_at = c.now
FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])
     AS c(id, token, queue_id, now)
WHERE m.id = c.id AND m.queue_id = c.queue_id AND m.lease_token = -c.token
  AND m.visible_at > c.now
RETURNING m.id, c.token;

-- email warm-up (issue 35) -----------------------------------------------------------------

-- name: warmup_open_day
-- (domain, day): today's row, so the count below has a row to lock and the first day is
-- known from the first send.
INSERT INTO email_warmup_days (domain, day, sent) VALUES (%s, %s, 0)
ON CONFLICT (domain, day) DO NOTHING;

-- name: warmup_sent_today
-- (domain, day): today's count; the row locked, so two nodes granting at once count
-- one after the other.
SELECT sent FROM email_warmup_days WHERE domain = %s AND day = %s FOR UPDATE;

-- name: warmup_first_day
-- (domain): day 1 of its warm-up, on the primary key.
SELECT min(day) FROM email_warmup_days WHERE domain = %s;

-- name: warmup_add
-- (count, domain, day)
UPDATE email_warmup_days SET sent = sent + %s WHERE domain = %s AND day = %s;
