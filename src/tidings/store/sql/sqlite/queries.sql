-- Named queries of the SQLite driver; each block starts with "-- name: <name>".
-- The names and the order of their parameters are the same as PostgreSQL's, so `SqlStore`
-- runs either file. All values are bound parameters; a list travels as one JSON text read
-- with json_each. Statements run by `run_each` number their parameters (?1, ?2, …): the
-- row's first values are its key.

-- ---------------------------------------------------------------------------------------
-- migrations and plumbing

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);

-- name: applied_migrations
SELECT version, name FROM schema_migrations;

-- name: schema_mark
SELECT COUNT(*), MAX(version) FROM schema_migrations;

-- name: table_exists
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?;

-- name: record_migration
INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?);

-- name: begin
-- IMMEDIATE: the write lock up front, so two processes never deadlock upgrading a read lock.
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: savepoint
SAVEPOINT bulk;

-- name: release_savepoint
RELEASE bulk;

-- name: rollback_to_savepoint
ROLLBACK TO bulk;

-- name: ping
SELECT 1;

-- name: get_meta
SELECT value FROM meta WHERE key = ?;

-- name: put_meta_if_absent
INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING;

-- name: put_meta
INSERT INTO meta (key, value) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- ---------------------------------------------------------------------------------------
-- queues

-- name: insert_queue
INSERT INTO queues (name, fifo, attributes, created_at, modified_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name) DO NOTHING
RETURNING id;

-- name: queue_by_name
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues WHERE name = ?;

-- name: queue_by_id
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues WHERE id = ?;

-- name: list_queues
-- Prefix match by range, [prefix, prefix + U+10FFFF), then keyset after the last name.
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues
WHERE name >= ? AND name < ? AND name > ? ORDER BY name LIMIT ?;

-- name: dead_letter_sources
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues
WHERE json_extract(attributes, '$.redrive_policy.dead_letter_queue') = ? ORDER BY name;

-- name: update_queue
UPDATE queues SET attributes = ?, modified_at = ? WHERE name = ?;

-- name: delete_queue
DELETE FROM queues WHERE id = ?;

-- name: delete_queue_messages
DELETE FROM messages WHERE queue_id = ?;

-- name: delete_queue_dedup
DELETE FROM fifo_dedup WHERE queue_id = ?;

-- name: delete_queue_jobs
DELETE FROM job_keys WHERE queue_id = ?;

-- name: delete_queue_counts
DELETE FROM queue_counts WHERE queue_id = ?;

-- name: set_purged_at
UPDATE queues SET purged_at = ? WHERE id = ?;

-- name: add_count
-- In the transaction of every insert and delete, so a queue's total is O(1) to read.
INSERT INTO queue_counts (queue_id, shard, n) VALUES (?, ?, ?)
ON CONFLICT (queue_id, shard) DO UPDATE SET n = n + excluded.n;

-- name: queue_total
SELECT COALESCE(SUM(n), 0) FROM queue_counts WHERE queue_id = ?;

-- name: not_visible_counts
-- Only rows not yet visible are walked (the index range after now): in flight and delayed.
SELECT COALESCE(SUM(lease_token IS NOT NULL), 0), COALESCE(SUM(lease_token IS NULL), 0)
FROM messages WHERE queue_id = ? AND visible_at > ?;

-- ---------------------------------------------------------------------------------------
-- messages

-- name: find_dedup
SELECT message_id, sequence_number FROM fifo_dedup
WHERE queue_id = ? AND deduplication_id = ? AND expires_at > ?;

-- name: put_dedup
INSERT INTO fifo_dedup (queue_id, deduplication_id, message_id, sequence_number, expires_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue_id, deduplication_id) DO UPDATE SET
    message_id = excluded.message_id, sequence_number = excluded.sequence_number,
    expires_at = excluded.expires_at;

-- name: insert_message
INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
                      visible_at, sent_at, expires_at, group_id, deduplication_id,
                      scheduled_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: insert_message_returning
-- FIFO sends need the row id: it is the message's SequenceNumber.
INSERT INTO messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
                      visible_at, sent_at, expires_at, group_id, deduplication_id,
                      scheduled_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id;

-- name: receive_simple
-- A standard queue without a redrive policy: one statement walks messages_ready from the
-- oldest visible row and leases what it finds. Expired rows are skipped here and deleted
-- by the sweeper.
UPDATE messages
SET visible_at = :until, lease_token = :token, receive_count = receive_count + 1,
    first_received_at = COALESCE(first_received_at, :now)
WHERE id IN (SELECT id FROM messages
             WHERE queue_id = :queue AND visible_at <= :now AND expires_at > :now
             ORDER BY visible_at LIMIT :limit)
RETURNING id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
          receive_count, first_received_at, sent_at, visible_at, group_id, deduplication_id,
          source_queue_id, last_error, scheduled_at;

-- name: receive_candidates
SELECT id, receive_count FROM messages
WHERE queue_id = :queue AND visible_at <= :now AND expires_at > :now
ORDER BY visible_at
LIMIT :limit;

-- name: receive_candidates_fifo
-- A group with any message in flight is skipped whole: one in-flight batch per group,
-- which is what keeps each group in strict order.
SELECT m.id, m.receive_count FROM messages AS m
WHERE m.queue_id = :queue AND m.visible_at <= :now AND m.expires_at > :now
  AND NOT EXISTS (
      SELECT 1 FROM messages AS b
      WHERE b.queue_id = m.queue_id AND b.group_id = m.group_id
        AND b.visible_at > :now AND b.lease_token IS NOT NULL)
ORDER BY m.id
LIMIT :limit;

-- name: lease_messages
UPDATE messages
SET visible_at = ?, lease_token = ?, receive_count = receive_count + 1,
    first_received_at = COALESCE(first_received_at, ?)
WHERE id IN (SELECT value FROM json_each(?)) AND visible_at <= ?
RETURNING id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
          receive_count, first_received_at, sent_at, visible_at, group_id, deduplication_id,
          source_queue_id, last_error, scheduled_at;

-- name: dead_letter_messages
-- maxReceiveCount reached: the message starts a new life in the DLQ, visible at once, its
-- retention still counted from the original send (as SQS does for standard queues).
UPDATE messages
SET queue_id = ?, source_queue_id = queue_id, visible_at = ?, lease_token = NULL,
    receive_count = 0, first_received_at = NULL, expires_at = MAX(sent_at + ?, sent_at)
WHERE id IN (SELECT value FROM json_each(?));

-- name: reject_message
-- (id, lease token, queue, error, DLQ, now, DLQ retention): a poison message goes to the
-- DLQ at once, guarded by its receipt's lease like a delete.
UPDATE messages
SET queue_id = ?5, source_queue_id = queue_id, visible_at = ?6, lease_token = NULL,
    receive_count = 0, first_received_at = NULL, expires_at = MAX(sent_at + ?7, sent_at),
    last_error = ?4
WHERE id = ?1 AND queue_id = ?3 AND lease_token = ?2;

-- name: delete_message
-- (id, lease token, queue): a stale receipt's token no longer matches, so it deletes
-- nothing. A receipt is keyed by (id, lease token): two receipts of one message differ.
DELETE FROM messages WHERE id = ?1 AND queue_id = ?3 AND lease_token = ?2;

-- name: change_visibility
-- (id, lease token, visible at, error, queue, now): only while in flight on this lease.
UPDATE messages SET visible_at = ?3, last_error = COALESCE(?4, last_error)
WHERE id = ?1 AND queue_id = ?5 AND lease_token = ?2 AND visible_at > ?6;

-- name: wake_held_back
-- (id, lease token, queue, now): a job held back (its receipt's token negated by
-- hold_back_messages, and not received since) visible now: its limit changed.
UPDATE messages SET visible_at = ?4
WHERE id = ?1 AND queue_id = ?3 AND lease_token = -?2 AND visible_at > ?4;

-- name: finish_job
-- (job key, queue, done at): the handler ran to success.
INSERT INTO job_keys (queue_id, job_key, state, done_at) VALUES (?2, ?1, 'done', ?3)
ON CONFLICT (queue_id, job_key) DO UPDATE SET
    state = 'done', done_at = excluded.done_at, lease_token = NULL, lease_until = NULL;

-- name: finish_job_keys
-- (job keys as JSON, queue, done at): `finish_job` for a whole group in one statement
-- (`WHERE true`: an upsert's SELECT needs a WHERE for SQLite to parse its ON CONFLICT).
INSERT INTO job_keys (queue_id, job_key, state, done_at)
SELECT ?2, value, 'done', ?3 FROM json_each(?1) WHERE true
ON CONFLICT (queue_id, job_key) DO UPDATE SET
    state = 'done', done_at = excluded.done_at, lease_token = NULL, lease_until = NULL;

-- name: delete_leased
-- (row ids as JSON, queue, lease token): `delete_message` for the messages of one
-- receive (they share its token), one statement. `+queue_id`: looked up by row id; with
-- the queue's index the planner walked the whole queue.
DELETE FROM messages
WHERE id IN (SELECT value FROM json_each(?1)) AND +queue_id = ?2 AND lease_token = ?3
RETURNING id;

-- name: reserve_job
-- (job key, queue, token, until, now): a new key, or one whose holder's lease ran out.
INSERT INTO job_keys (queue_id, job_key, state, lease_token, lease_until)
VALUES (?2, ?1, 'running', ?3, ?4)
ON CONFLICT (queue_id, job_key) DO UPDATE SET
    lease_token = excluded.lease_token, lease_until = excluded.lease_until
WHERE job_keys.state = 'running' AND job_keys.lease_until <= ?5;

-- name: reserve_job_group
-- (job keys as JSON, queue, token, until, now): `reserve_job` for keys sharing a token,
-- one statement; RETURNING names the keys it took (an upsert whose WHERE fails returns
-- nothing).
INSERT INTO job_keys (queue_id, job_key, state, lease_token, lease_until)
SELECT ?2, value, 'running', ?3, ?4 FROM json_each(?1) WHERE true
ON CONFLICT (queue_id, job_key) DO UPDATE SET
    lease_token = excluded.lease_token, lease_until = excluded.lease_until
WHERE job_keys.state = 'running' AND job_keys.lease_until <= ?5
RETURNING job_key;

-- name: job_key_states
SELECT job_key, state FROM job_keys
WHERE queue_id = ? AND job_key IN (SELECT value FROM json_each(?));

-- name: job_key_state
-- `job_key_states` for a key json_each cannot carry (one holding a NUL).
SELECT state FROM job_keys WHERE queue_id = ? AND job_key = ?;

-- name: extend_job
-- (job key, queue, token, until)
UPDATE job_keys SET lease_until = ?4
WHERE queue_id = ?2 AND job_key = ?1 AND state = 'running' AND lease_token = ?3;

-- name: release_job
-- (job key, queue, token)
DELETE FROM job_keys
WHERE queue_id = ?2 AND job_key = ?1 AND state = 'running' AND lease_token = ?3;

-- name: peek_messages
-- In receive order (messages_ready), keyset-paged; the columns a receive returns.
SELECT id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
       receive_count, first_received_at, sent_at, visible_at, group_id, deduplication_id,
       source_queue_id, last_error, scheduled_at
FROM messages
WHERE queue_id = :queue AND (visible_at, id) > (:after_visible, :after_id)
ORDER BY visible_at, id LIMIT :limit;

-- name: cancel_message
-- A delayed message withdrawn by its sender (a task handle's cancel): found through the
-- (queue_id, visible_at) index by the instant it was sent for; only while still delayed
-- (never leased, not yet visible), so a job already running is never pulled away.
DELETE FROM messages
WHERE queue_id = ? AND visible_at = ? AND message_id = ? AND visible_at > ?
  AND lease_token IS NULL
RETURNING id;

-- name: next_visible_at
SELECT MIN(visible_at) FROM messages WHERE queue_id = ? AND visible_at > ?;

-- name: expire_messages
DELETE FROM messages WHERE id IN (
    SELECT id FROM messages WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)
RETURNING queue_id;

-- name: expire_dedup
DELETE FROM fifo_dedup WHERE expires_at <= ?;

-- name: forget_done_jobs
DELETE FROM job_keys WHERE (queue_id, job_key) IN (
    SELECT queue_id, job_key FROM job_keys WHERE done_at < ? LIMIT ?);

-- name: forget_lapsed_jobs
-- Reservations of consumers that died: their lease ran out long ago.
DELETE FROM job_keys WHERE (queue_id, job_key) IN (
    SELECT queue_id, job_key FROM job_keys WHERE state = 'running' AND lease_until < ? LIMIT ?);

-- name: movable_messages
SELECT id, source_queue_id FROM messages WHERE queue_id = ? ORDER BY id LIMIT ?;

-- name: movable_message
SELECT id, source_queue_id FROM messages WHERE queue_id = ? AND id = ?;

-- name: move_message
UPDATE messages
SET queue_id = ?, visible_at = ?, lease_token = NULL, receive_count = 0,
    first_received_at = NULL, source_queue_id = NULL
WHERE id = ?;

-- ---------------------------------------------------------------------------------------
-- message move tasks

-- name: insert_move_task
-- seq: the next number (the write lock is held: no two inserts take the same one).
INSERT INTO move_tasks (handle, source_queue_id, destination_queue_id, max_per_second, status,
                        moved, to_move, started_at, failure_reason, seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM move_tasks));

-- name: list_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE source_queue_id = ? ORDER BY started_at DESC, seq DESC LIMIT ?;

-- name: active_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE status = 'RUNNING' ORDER BY started_at;

-- name: add_move_task_progress
UPDATE move_tasks SET moved = moved + ? WHERE handle = ?;

-- name: set_move_task_status
-- Compare-and-set on the status the caller read.
UPDATE move_tasks SET status = ?, failure_reason = COALESCE(?, failure_reason)
WHERE handle = ? AND status = ?;

-- ---------------------------------------------------------------------------------------
-- schedules

-- name: insert_group
INSERT INTO schedule_groups (name, created_at, modified_at, tags, client_token)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name) DO NOTHING;

-- name: group_by_name
SELECT name, created_at, modified_at, tags, client_token FROM schedule_groups WHERE name = ?;

-- name: list_groups
SELECT name, created_at, modified_at, tags, client_token FROM schedule_groups
WHERE name >= ? AND name < ? AND name > ? ORDER BY name LIMIT ?;

-- name: delete_group
DELETE FROM schedule_groups WHERE name = ?;

-- name: update_group_tags
UPDATE schedule_groups SET tags = ?, modified_at = ? WHERE name = ?;

-- name: delete_group_schedules
DELETE FROM schedules WHERE group_name = ?;

-- name: insert_schedule
-- The bulk path (executemany): ScheduleRow's columns, in order. (group, name) is the key.
INSERT INTO schedules (group_name, name, state, expression, timezone, start_at, end_at,
                       flex_minutes, target, action_after_completion, description, client_token,
                       next_fire_at, due_at, created_at, modified_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
ON CONFLICT (group_name, name) DO NOTHING;

-- name: create_schedule
-- One create in one statement (ScheduleRow's columns, then the group again): only into an
-- existing group, nothing when the name is taken. No RETURNING: the driver's insert_id
-- reads the row count and the new rowid.
INSERT INTO schedules (group_name, name, state, expression, timezone, start_at, end_at,
                       flex_minutes, target, action_after_completion, description, client_token,
                       next_fire_at, due_at, created_at, modified_at)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16
WHERE EXISTS (SELECT 1 FROM schedule_groups WHERE name = ?17)
ON CONFLICT (group_name, name) DO NOTHING;

-- name: schedule_by_name
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules WHERE group_name = ? AND name = ?;

-- name: list_schedules
-- Every group, keyset-paged by (group, name) after the last row of the previous page.
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules
WHERE name >= :lo AND name < :hi AND (:state IS NULL OR state = :state)
  AND (group_name, name) > (:after_group, :after_name)
ORDER BY group_name, name LIMIT :limit;

-- name: list_group_schedules
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules
WHERE group_name = :group AND name >= :lo AND name < :hi AND name > :after_name
  AND (:state IS NULL OR state = :state)
ORDER BY name LIMIT :limit;

-- name: replace_schedule
UPDATE schedules
SET state = ?, expression = ?, timezone = ?, start_at = ?, end_at = ?, flex_minutes = ?,
    target = ?, action_after_completion = ?, description = ?, next_fire_at = ?, due_at = ?,
    modified_at = ?, version = version + 1
WHERE group_name = ? AND name = ?;

-- name: delete_schedule
DELETE FROM schedules WHERE group_name = ? AND name = ?;

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
      WHERE due_at >= ? AND due_at < ? ORDER BY due_at LIMIT ?) AS s;

-- name: read_due
-- (now, limit) A firing pass's claim on a single-writer database (`Store.firing_pass`): a
-- plain read, no mark. The pass plans outside any transaction, then completes with
-- `delete_fired_schedule` / `advance_schedule`, whose compare-and-set on what it read
-- refuses a row fired, updated or deleted since; a pass killed before completing wrote
-- nothing, so its rows are due at once.
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules WHERE due_at <= ? ORDER BY due_at LIMIT ?;

-- name: advance_schedule
-- (id, version, occurrence, next fire at, due at, fired at): a firing pass's completion of
-- a row it claimed (`read_due`): a compare-and-set on the version the pass read (every
-- write adds one, so a row fired, updated or paused since refuses) and the occurrence
-- the firing was planned for; the row count is checked.
UPDATE schedules SET next_fire_at = ?4, due_at = ?5,
    last_fired_at = COALESCE(?6, last_fired_at), version = version + 1
WHERE id = ?1 AND version = ?2 AND next_fire_at = ?3;

-- name: delete_fired_schedule
-- (id, version, occurrence): `advance_schedule` for a one-shot that deletes itself
DELETE FROM schedules WHERE id = ?1 AND version = ?2 AND next_fire_at = ?3;

-- name: count_schedules
SELECT COUNT(*) FROM schedules;

-- name: disabled_schedules
SELECT name, next_fire_at, flex_minutes FROM schedules
WHERE group_name = ? AND state = 'DISABLED' AND name > ? ORDER BY name LIMIT ?;

-- name: schedule_state_counts
SELECT state, COUNT(*) FROM schedules WHERE group_name = ? GROUP BY state;

-- name: firings_by_due
SELECT due_at / ?, json_extract(target, '$.kind'), COUNT(*) FROM schedules
WHERE due_at >= ? AND due_at < ? GROUP BY 1, 2;

-- name: firings_by_due_destination
-- (bucket, start, end): the forecast's limited keys (a queue's, a host's, a function's):
-- due firings per bucket, target kind and destination.
SELECT due_at / ?, json_extract(target, '$.kind'), json_extract(target, '$.destination'),
    COUNT(*) FROM schedules
WHERE due_at >= ? AND due_at < ? GROUP BY 1, 2, 3;

-- name: group_firings_by_due_destination
-- `firings_by_due_destination` of one group (a campaign).
SELECT due_at / :bucket, json_extract(target, '$.kind'),
    json_extract(target, '$.destination'), COUNT(*) FROM schedules
WHERE group_name = :group AND due_at >= :lo AND due_at < :hi GROUP BY 1, 2, 3;

-- name: firings_by_due_input
-- The forecast's keys read from inputs (a recipient's domain): due firings of one kind
-- per bucket and input text (of one group when :group is not null); the key is read in Python.
SELECT due_at / :bucket, json_extract(target, '$.input'), COUNT(*) FROM schedules
WHERE due_at >= :lo AND due_at < :hi AND json_extract(target, '$.kind') = :kind
    AND (:group IS NULL OR group_name = :group)
GROUP BY 1, 2;

-- name: firings_by_occurrence
SELECT next_fire_at / ?, json_extract(target, '$.kind'), COUNT(*) FROM schedules
WHERE due_at IS NOT NULL AND next_fire_at >= ? AND next_fire_at < ? GROUP BY 1, 2;

-- ---------------------------------------------------------------------------------------
-- email

-- name: insert_template
INSERT INTO email_templates (name, subject, html, text, created_at, modified_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING;

-- name: update_template
UPDATE email_templates SET subject = ?, html = ?, text = ?, modified_at = ? WHERE name = ?;

-- name: template_by_name
SELECT name, subject, html, text, created_at, modified_at FROM email_templates WHERE name = ?;

-- name: list_templates
SELECT name, subject, html, text, created_at, modified_at FROM email_templates
WHERE name > ? ORDER BY name LIMIT ?;

-- name: delete_template
DELETE FROM email_templates WHERE name = ?;

-- name: put_suppression
-- (address, reason, created at). The first reason stays: re-adding an address keeps when
-- and why it was first suppressed.
INSERT INTO suppressions (address, reason, created_at) VALUES (?1, ?2, ?3)
ON CONFLICT (address) DO NOTHING;

-- name: delete_suppression
DELETE FROM suppressions WHERE address = ?;

-- name: suppressed_among
SELECT address, reason, created_at FROM suppressions
WHERE address IN (SELECT value FROM json_each(?));

-- name: list_suppressions
SELECT address, reason, created_at FROM suppressions
WHERE address > :after AND (:reason IS NULL OR reason = :reason)
ORDER BY address LIMIT :limit;

-- name: insert_delivery
INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, sender,
                              recipients, state, detail, attempts, created_at, updated_at,
                              document)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING
RETURNING seq;

-- name: insert_deliveries
-- One delivery row of a group commit, run per row (SQLite has no round trip to save; its
-- seq is the rowid the driver reads); an id already logged does not go in.
INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, sender,
                              recipients, state, detail, attempts, created_at, updated_at,
                              document)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING;

-- name: insert_delivery_recipient
-- (address, delivery seq)
INSERT INTO email_delivery_recipients (address, delivery_seq) VALUES (?1, ?2)
ON CONFLICT DO NOTHING;

-- name: update_delivery
-- Compare-and-set on the state the caller read (final states are final).
UPDATE email_deliveries SET state = ?, detail = ?, attempts = MAX(attempts, ?), updated_at = ?
WHERE id = ? AND state = ?;

-- name: delivery_by_id
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries WHERE id = ?;

-- name: deliveries_by_id
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries WHERE id IN (SELECT value FROM json_each(?));

-- name: list_deliveries
-- Newest first, keyset-paged on seq.
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries
WHERE seq < :before AND (:state IS NULL OR state = :state)
ORDER BY seq DESC LIMIT :limit;

-- name: list_recipient_deliveries
SELECT d.seq, d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
       d.recipients, d.state, d.detail, d.attempts, d.created_at, d.updated_at, d.document
FROM email_deliveries AS d JOIN email_delivery_recipients AS r ON r.delivery_seq = d.seq
WHERE r.address = :address AND d.seq < :before AND (:state IS NULL OR d.state = :state)
ORDER BY d.seq DESC LIMIT :limit;

-- name: find_deliveries
-- The filters of `tidings email resend`; oldest first, keyset-paged on seq.
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at, document
FROM email_deliveries
WHERE seq > :after AND (:message_id IS NULL OR message_id = :message_id)
  AND (NOT :has_prefix OR (schedule >= :lo AND schedule < :hi))
  AND (:state IS NULL OR state = :state)
  AND (:created_from IS NULL OR created_at >= :created_from)
  AND (:created_until IS NULL OR created_at < :created_until)
ORDER BY seq LIMIT :limit;

-- name: find_recipient_deliveries
SELECT d.seq, d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
       d.recipients, d.state, d.detail, d.attempts, d.created_at, d.updated_at, d.document
FROM email_deliveries AS d JOIN email_delivery_recipients AS r ON r.delivery_seq = d.seq
WHERE r.address = :address AND d.seq > :after
  AND (:message_id IS NULL OR d.message_id = :message_id)
  AND (NOT :has_prefix OR (d.schedule >= :lo AND d.schedule < :hi))
  AND (:state IS NULL OR d.state = :state)
  AND (:created_from IS NULL OR d.created_at >= :created_from)
  AND (:created_until IS NULL OR d.created_at < :created_until)
ORDER BY d.seq LIMIT :limit;

-- name: delivery_state_counts
SELECT state, COUNT(*) FROM email_deliveries WHERE schedule >= ? AND schedule < ?
GROUP BY state;

-- ---------------------------------------------------------------------------------------
-- campaigns

-- name: insert_campaign
INSERT INTO campaigns (name, steps, template, status, created_at, modified_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING;

-- name: campaign_by_name
SELECT name, steps, template, status, rows_read, schedules_created, row_errors, cancelled,
       created_at, modified_at
FROM campaigns WHERE name = ?;

-- name: list_campaigns
SELECT name, steps, template, status, rows_read, schedules_created, row_errors, cancelled,
       created_at, modified_at
FROM campaigns WHERE name > ? ORDER BY name LIMIT ?;

-- name: update_campaign_steps
UPDATE campaigns SET steps = ?, modified_at = ? WHERE name = ?;

-- name: add_campaign_progress
-- A re-run reads the same rows again: rows read and row errors keep their highest count,
-- while schedules created add up (a re-run only creates what is missing).
UPDATE campaigns SET rows_read = MAX(rows_read, ?), row_errors = MAX(row_errors, ?),
    schedules_created = schedules_created + ?, modified_at = ?
WHERE name = ?;

-- name: add_campaign_created
-- In the transaction that inserts the schedules: the count cannot drift from the rows.
UPDATE campaigns SET schedules_created = schedules_created + ? WHERE name = ?;

-- name: set_campaign_status
-- Compare-and-set on the status the caller read.
UPDATE campaigns SET status = ?, modified_at = ? WHERE name = ? AND status = ?;

-- name: lock_active_campaign
-- SQLite's write transaction already excludes every other writer.
SELECT 1 FROM campaigns WHERE name = ? AND status = 'ACTIVE';

-- name: add_campaign_cancelled
UPDATE campaigns SET cancelled = cancelled + ?, modified_at = ? WHERE name = ?;

-- name: disable_group_schedules
UPDATE schedules SET state = 'DISABLED', due_at = NULL, modified_at = ?,
    version = version + 1
WHERE group_name = ? AND state = 'ENABLED';

-- name: enable_schedule
-- (name, due at, now, group)
UPDATE schedules SET state = 'ENABLED', due_at = ?2, modified_at = ?3,
    version = version + 1
WHERE group_name = ?4 AND name = ?1 AND state = 'DISABLED';

-- name: delete_group_schedule
-- (name, group)
DELETE FROM schedules WHERE group_name = ?2 AND name = ?1;

-- ---------------------------------------------------------------------------------------
-- nodes and the console's counts

-- name: put_node
INSERT INTO nodes (id, host, pid, version, started_at, seen_at, activity)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, activity = excluded.activity;

-- name: list_nodes
SELECT id, host, pid, version, started_at, seen_at, activity FROM nodes
WHERE seen_at >= ? ORDER BY started_at, id;

-- name: forget_nodes
DELETE FROM nodes WHERE seen_at < ?;

-- name: put_console_count
INSERT INTO console_counts (name, value, taken_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, taken_at = excluded.taken_at;

-- name: console_counts
SELECT name, value, taken_at FROM console_counts;

-- name: count_pending_schedules
-- Walks the due index only (disabled and completed schedules are not in it).
SELECT COUNT(*) FROM schedules WHERE due_at IS NOT NULL;

-- name: count_due_between
SELECT COUNT(*) FROM schedules WHERE due_at >= ? AND due_at < ?;

-- name: delivery_counts_since
SELECT state, COUNT(*) FROM email_deliveries WHERE created_at >= ? GROUP BY state;

-- name: schedules_by_due
-- Keyset-paged by (due_at, id) along the due index: page 1,000 costs what page 1 does.
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at, version
FROM schedules
WHERE due_at >= :lo AND due_at < :hi AND (due_at, id) > (:after_due, :after_id)
ORDER BY due_at, id LIMIT :limit;

-- security: the audit log and verified email identities

-- name: insert_audit
INSERT INTO audit_log (at, actor, face, action, resource) VALUES (?, ?, ?, ?, ?);

-- name: list_audit
-- Newest first, keyset-paged on seq.
SELECT seq, at, actor, face, action, resource FROM audit_log
WHERE seq < :before AND (:actor IS NULL OR actor = :actor)
ORDER BY seq DESC LIMIT :limit;

-- name: insert_email_identity
INSERT INTO email_identities (identity, created_at) VALUES (?, ?)
ON CONFLICT (identity) DO NOTHING;

-- name: delete_email_identity
DELETE FROM email_identities WHERE identity = ?;

-- name: list_email_identities
SELECT identity, created_at FROM email_identities ORDER BY identity;

-- name: schedule_keys
-- What a filtered search reads of each schedule it walks past: little, so a scan of
-- thousands stays quick; the matches are then read whole.
SELECT id, group_name, name, state, target, due_at FROM schedules
WHERE name >= :lo AND name < :hi AND (group_name, name) > (:after_group, :after_name)
ORDER BY group_name, name LIMIT :limit;

-- name: group_schedule_keys
SELECT id, group_name, name, state, target, due_at FROM schedules
WHERE group_name = :group AND name >= :lo AND name < :hi AND name > :after_name
ORDER BY name LIMIT :limit;

-- name: due_schedule_keys
SELECT id, group_name, name, state, target, due_at FROM schedules
WHERE due_at >= :lo AND due_at < :hi AND (due_at, id) > (:after_due, :after_id)
ORDER BY due_at, id LIMIT :limit;

-- name: schedule_state_counts_between
-- A campaign step's schedules (names from lo to hi in the campaign's group), by state.
SELECT state, COUNT(*) FROM schedules WHERE group_name = ? AND name >= ? AND name < ?
GROUP BY state;

-- name: group_firings_by_due
-- One group's (a campaign's) enabled schedules due in [start, end), per bucket.
SELECT due_at / :bucket, COUNT(*) FROM schedules
WHERE group_name = :group AND due_at >= :lo AND due_at < :hi GROUP BY 1;

-- ---------------------------------------------------------------------------------------
-- reclaiming the space of deleted rows (docs/reliability.md, "Long soak")

-- name: reclaim_needed
-- SQLite puts the pages of deleted rows on its free list and reuses them for new rows by
-- itself: the file grows to the peak of live data, never with the deletes. Nothing to do.
SELECT 0;

-- name: reclaim_space
-- Not run (reclaim_needed is 0 here); both backends name the same queries. On a file
-- switched to auto_vacuum=INCREMENTAL by hand it would give free pages back.
PRAGMA incremental_vacuum;

-- ---------------------------------------------------------------------------------------
-- firing outcomes (the console's schedule page; 0011_firings.sql)

-- name: insert_firings
-- (schedule id, occurrence, at, outcome, attempts, detail), executemany: one per batch.
INSERT INTO firings (schedule_id, occurrence, at, outcome, attempts, detail)
VALUES (?, ?, ?, ?, ?, ?);

-- name: recent_firings
SELECT occurrence, at, outcome, attempts, detail FROM firings
WHERE schedule_id = ? AND at >= ? ORDER BY id DESC LIMIT ?;

-- name: firings_trim_bound
-- The first id below the bound young enough to keep: the scan, in id order, stops there,
-- so it reads about as many rows as the trim deletes (at most the bound's).
SELECT id FROM firings WHERE id < ? AND at >= ? ORDER BY id LIMIT 1;

-- name: firings_id_range
SELECT MIN(id), MAX(id) FROM firings;

-- name: trim_firings
DELETE FROM firings WHERE id < ?;

-- ---------------------------------------------------------------------------------------
-- campaign steps' cancelled counts (0012_campaign_step_cancelled.sql)

-- name: delete_group_schedules_between
-- One campaign step's schedules (names from lo to hi in the campaign's group).
DELETE FROM schedules WHERE group_name = ? AND name >= ? AND name < ?;

-- name: add_step_cancelled
INSERT INTO campaign_step_counts (campaign, step, cancelled) VALUES (?, ?, ?)
ON CONFLICT (campaign, step) DO UPDATE
SET cancelled = campaign_step_counts.cancelled + excluded.cancelled;

-- name: step_cancelled_counts
SELECT step, cancelled FROM campaign_step_counts WHERE campaign = ?;

-- name: sent_to_since
-- The per-recipient frequency cap (email/deliverability.py): SENT deliveries to one
-- address since an instant, through the recipients table's (address, delivery_seq) key.
SELECT COUNT(*) FROM email_delivery_recipients AS r
JOIN email_deliveries AS d ON d.seq = r.delivery_seq
WHERE r.address = :address AND d.state = 'SENT' AND d.updated_at >= :since;
-- ---------------------------------------------------------------------------------------
-- contact lists, contacts and returned-mail events (0018)

-- name: insert_contact_list
INSERT INTO contact_lists (name, description, topics, created_at, updated_at)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING;

-- name: contact_list_by_name
SELECT name, description, topics, created_at, updated_at FROM contact_lists WHERE name = ?;

-- name: list_contact_lists
SELECT name, description, topics, created_at, updated_at FROM contact_lists
WHERE name > ? ORDER BY name LIMIT ?;

-- name: update_contact_list
UPDATE contact_lists SET description = ?, topics = ?, updated_at = ? WHERE name = ?;

-- name: delete_contact_list
DELETE FROM contact_lists WHERE name = ?;

-- name: delete_list_contacts
DELETE FROM contacts WHERE list_name = ?;

-- name: insert_contact
INSERT INTO contacts (list_name, address, preferences, unsubscribe_all, attributes,
                      created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (list_name, address) DO NOTHING;

-- name: update_contact
UPDATE contacts SET preferences = ?, unsubscribe_all = ?, attributes = ?, updated_at = ?
WHERE list_name = ? AND address = ?;

-- name: contact_by_key
SELECT list_name, address, preferences, unsubscribe_all, attributes, created_at, updated_at
FROM contacts WHERE list_name = ? AND address = ?;

-- name: contacts_among
SELECT list_name, address, preferences, unsubscribe_all, attributes, created_at, updated_at
FROM contacts WHERE list_name = ? AND address IN (SELECT value FROM json_each(?));

-- name: list_contacts
SELECT list_name, address, preferences, unsubscribe_all, attributes, created_at, updated_at
FROM contacts WHERE list_name = ? AND address > ? ORDER BY address LIMIT ?;

-- name: delete_contact
DELETE FROM contacts WHERE list_name = ? AND address = ?;

-- name: insert_email_event
INSERT INTO email_events (delivery_id, address, kind, source, detail, created_at)
VALUES (?, ?, ?, ?, ?, ?);

-- name: list_email_events
-- Newest first; :before is the seq of the previous page's last row.
SELECT seq, delivery_id, address, kind, source, detail, created_at FROM email_events
WHERE seq < :before AND (:delivery_id IS NULL OR delivery_id = :delivery_id)
  AND (:address IS NULL OR address = :address)
ORDER BY seq DESC LIMIT :limit;

-- name: soft_bounce_count
SELECT count(*) FROM email_events WHERE address = ? AND kind = 'SOFT_BOUNCE';

-- name: soft_bounces_since
-- (address, since): the window of TIDINGS_EMAIL_SOFT_BOUNCE_DAYS, on email_events_address.
SELECT count(*) FROM email_events
WHERE address = ? AND kind = 'SOFT_BOUNCE' AND created_at >= ?;

-- name: append_delivery_detail
-- (text, updated at, delivery id): returned mail joins what the log says of its delivery;
-- bounded, since a delivery may hear back many times.
UPDATE email_deliveries
SET detail = substr(coalesce(detail || '; ', '') || ?, 1, 4000), updated_at = ?
WHERE id = ?;

-- name: move_delivery_state
-- (new, updated at, id, current): a compare-and-set that keeps the detail (checked
-- against DELIVERIES by its caller).
UPDATE email_deliveries SET state = ?, updated_at = ? WHERE id = ? AND state = ?;

-- limits (issue 33) ----------------------------------------------------------------------

-- name: limit_settings
SELECT key, rate_count, period_ms, burst, concurrency, source, updated_at FROM limits
ORDER BY key;

-- name: put_limit
-- (key, rate count, period ms, burst, concurrency, source, updated at)
INSERT INTO limits (key, rate_count, period_ms, burst, concurrency, source, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET rate_count = excluded.rate_count,
    period_ms = excluded.period_ms, burst = excluded.burst,
    concurrency = excluded.concurrency, source = excluded.source,
    updated_at = excluded.updated_at;

-- name: delete_limit
DELETE FROM limits WHERE key = ?;

-- name: limit_pauses
-- (now): the keys paused beyond now.
SELECT key, paused_until FROM limit_keys WHERE paused_until > ? ORDER BY key;

-- name: ensure_limit_key
INSERT INTO limit_keys (key) VALUES (?) ON CONFLICT (key) DO NOTHING;

-- name: lock_limit_key
-- The key's row, held until the acquisition commits: nodes take a key's room in turn.
SELECT paused_until, tat FROM limit_keys WHERE key = ?;

-- name: limit_key_paused_until
SELECT paused_until FROM limit_keys WHERE key = ?;

-- name: expire_limit_slots
-- (key, now): slots whose lease ran out (their holder died or hung) are free again.
DELETE FROM limit_slots WHERE key = ? AND expires_at <= ?;

-- name: count_limit_slots
SELECT count(*) FROM limit_slots WHERE key = ?;

-- name: expire_limit_starts
-- (key, window start): starts that left the sliding window.
DELETE FROM limit_starts WHERE key = ? AND at_ms <= ?;

-- name: limit_starts
SELECT at_ms FROM limit_starts WHERE key = ? ORDER BY at_ms;

-- name: insert_limit_slot
INSERT INTO limit_slots (key, holder, expires_at) VALUES (?, ?, ?)
ON CONFLICT (key, holder) DO UPDATE SET expires_at = excluded.expires_at;

-- name: insert_limit_start
INSERT INTO limit_starts (key, at_ms) VALUES (?, ?);

-- name: set_limit_tat
UPDATE limit_keys SET tat = ? WHERE key = ?;

-- name: release_limit_slot
DELETE FROM limit_slots WHERE key = ? AND holder = ?;

-- name: extend_limit_slot
UPDATE limit_slots SET expires_at = ? WHERE key = ? AND holder = ?;

-- name: pause_limit_key
-- (key, until): a pushback; a later pause already there stands.
INSERT INTO limit_keys (key, paused_until) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET paused_until = max(
    COALESCE(limit_keys.paused_until, 0), excluded.paused_until);

-- name: set_limit_pause
-- (key, until or NULL): the operator's pause (or resume), as given.
INSERT INTO limit_keys (key, paused_until) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET paused_until = excluded.paused_until;

-- name: limit_slots_in_use
-- (now): live slots by key.
SELECT key, count(*) FROM limit_slots WHERE expires_at > ? GROUP BY key ORDER BY key;

-- name: limit_starts_by_key
-- (since): starts since the instant, by key.
SELECT key, count(*), max(at_ms) FROM limit_starts WHERE at_ms > ? GROUP BY key ORDER BY key;

-- name: forget_limit_rows
-- (before): starts older than any window, slots long expired.
DELETE FROM limit_starts WHERE at_ms < ?;

-- name: forget_limit_slots
DELETE FROM limit_slots WHERE expires_at <= ?;

-- name: hold_back_messages
-- (id, lease token, visible at, error, queue, now): a job a limit held back goes back to
-- its queue until `visible at` without counting as a receive (the receive that leased it
-- added one: taken back here, in the same compare-and-set on its lease). The lease token
-- is negated, so the receipt is spent: it cannot take the count back twice.
UPDATE messages SET visible_at = ?3, receive_count = max(receive_count - 1, 0),
    lease_token = -lease_token, last_error = COALESCE(?4, last_error)
WHERE id = ?1 AND queue_id = ?5 AND lease_token = ?2 AND visible_at > ?6;

-- email warm-up (issue 35) -----------------------------------------------------------------

-- name: warmup_open_day
-- (domain, day): today's row, so the count below has a row to lock and the first day is
-- known from the first send.
INSERT INTO email_warmup_days (domain, day, sent) VALUES (?, ?, 0)
ON CONFLICT (domain, day) DO NOTHING;

-- name: warmup_sent_today
-- (domain, day): today's count (BEGIN IMMEDIATE serialises two nodes granting at once).
SELECT sent FROM email_warmup_days WHERE domain = ? AND day = ?;

-- name: warmup_first_day
-- (domain): day 1 of its warm-up, on the primary key.
SELECT min(day) FROM email_warmup_days WHERE domain = ?;

-- name: warmup_add
-- (count, domain, day)
UPDATE email_warmup_days SET sent = sent + ? WHERE domain = ? AND day = ?;
