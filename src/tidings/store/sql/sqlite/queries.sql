-- Named queries of the SQLite store; each block starts with "-- name: <name>".
-- All values are bound parameters.

-- name: get_meta
SELECT value FROM meta WHERE key = ?;

-- name: put_meta_if_absent
INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING;

-- name: insert_queue
INSERT INTO queues (name, fifo, attributes, created_at, modified_at) VALUES (?, ?, ?, ?, ?)
RETURNING id;

-- name: queue_columns
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues;

-- name: update_queue
UPDATE queues SET attributes = ?, modified_at = ? WHERE name = ?;

-- name: delete_queue
DELETE FROM queues WHERE id = ?;

-- name: delete_queue_messages
DELETE FROM messages WHERE queue_id = ?;

-- name: delete_queue_dedup
DELETE FROM fifo_dedup WHERE queue_id = ?;

-- name: delete_queue_jobs
DELETE FROM job_results WHERE queue_id = ?;

-- name: purge_queue
UPDATE queues SET message_count = 0, purged_at = ? WHERE id = ?;

-- name: add_count
UPDATE queues SET message_count = message_count + ? WHERE id = ?;

-- name: queue_total
SELECT message_count FROM queues WHERE id = ?;

-- name: not_visible_counts
-- Only rows not yet visible are walked (the index range after now): in flight and delayed.
SELECT COALESCE(SUM(lease_token IS NOT NULL), 0), COALESCE(SUM(lease_token IS NULL), 0)
FROM messages WHERE queue_id = ? AND visible_at > ?;

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
                      visible_at, sent_at, expires_at, group_id, deduplication_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: receive_candidates
-- Walks messages_ready from the oldest visible row; expired rows are skipped here and
-- deleted by the sweeper.
SELECT id, receive_count FROM messages
WHERE queue_id = ? AND visible_at <= ? AND expires_at > ?
ORDER BY visible_at
LIMIT ?;

-- name: receive_candidates_fifo
-- A group with any message in flight is skipped whole: one in-flight batch per group,
-- which is what keeps each group in strict order.
SELECT m.id, m.receive_count FROM messages AS m
WHERE m.queue_id = ? AND m.visible_at <= ? AND m.expires_at > ?
  AND NOT EXISTS (
      SELECT 1 FROM messages AS b
      WHERE b.queue_id = m.queue_id AND b.group_id = m.group_id
        AND b.visible_at > ? AND b.lease_token IS NOT NULL)
ORDER BY m.id
LIMIT ?;

-- name: lease_messages
UPDATE messages
SET visible_at = ?, lease_token = ?, receive_count = receive_count + 1,
    first_received_at = COALESCE(first_received_at, ?)
WHERE id IN (SELECT value FROM json_each(?)) AND visible_at <= ?
RETURNING id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
          receive_count, first_received_at, sent_at, group_id, deduplication_id,
          source_queue_id, last_error;

-- name: dead_letter_messages
-- maxReceiveCount reached: the message starts a new life in the DLQ, visible at once, its
-- retention still counted from the original send (as SQS does for standard queues).
UPDATE messages
SET queue_id = ?, source_queue_id = queue_id, visible_at = ?, lease_token = NULL,
    receive_count = 0, first_received_at = NULL, expires_at = MAX(sent_at + ?, sent_at)
WHERE id IN (SELECT value FROM json_each(?));

-- name: delete_message
DELETE FROM messages WHERE id = ? AND queue_id = ? AND lease_token = ?;

-- name: change_visibility
UPDATE messages SET visible_at = ?, last_error = COALESCE(?, last_error)
WHERE id = ? AND queue_id = ? AND lease_token = ? AND visible_at > ?;

-- name: put_job_result
INSERT INTO job_results (queue_id, job_id, done_at) VALUES (?, ?, ?)
ON CONFLICT (queue_id, job_id) DO NOTHING;

-- name: job_done
SELECT job_id FROM job_results WHERE queue_id = ? AND job_id IN (SELECT value FROM json_each(?));

-- name: next_visible_at
SELECT MIN(visible_at) FROM messages WHERE queue_id = ? AND visible_at > ?;

-- name: expired_messages
SELECT id, queue_id FROM messages WHERE expires_at <= ? ORDER BY expires_at LIMIT ?;

-- name: delete_by_ids
DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?));

-- name: expire_dedup
DELETE FROM fifo_dedup WHERE expires_at <= ?;

-- name: forget_jobs
DELETE FROM job_results WHERE (queue_id, job_id) IN (
    SELECT queue_id, job_id FROM job_results WHERE done_at < ? LIMIT ?);

-- name: movable_messages
SELECT id, source_queue_id FROM messages WHERE queue_id = ? ORDER BY id LIMIT ?;

-- name: move_message
UPDATE messages
SET queue_id = ?, visible_at = ?, lease_token = NULL, receive_count = 0,
    first_received_at = NULL, source_queue_id = NULL
WHERE id = ?;

-- name: insert_move_task
INSERT INTO move_tasks (handle, source_queue_id, destination_queue_id, max_per_second, status,
                        moved, to_move, started_at, failure_reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: list_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE source_queue_id = ? ORDER BY started_at DESC, rowid DESC LIMIT ?;

-- name: running_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE status = 'RUNNING' ORDER BY started_at;

-- name: update_move_task
UPDATE move_tasks SET moved = ?, status = ?, failure_reason = ?
WHERE handle = ? AND status = 'RUNNING';

-- name: queue_count_by_id
SELECT COUNT(*) FROM messages WHERE queue_id = ?;

-- ---------------------------------------------------------------------------------------
-- schedules

-- name: insert_group
INSERT INTO schedule_groups (name, created_at, modified_at, tags) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO NOTHING;

-- name: group_columns
SELECT name, created_at, modified_at, tags FROM schedule_groups;

-- name: delete_group
DELETE FROM schedule_groups WHERE name = ?;

-- name: update_group_tags
UPDATE schedule_groups SET tags = ?, modified_at = ? WHERE name = ?;

-- name: delete_group_schedules
DELETE FROM schedules WHERE group_name = ?;

-- name: insert_schedule
INSERT INTO schedules (group_name, name, state, expression, timezone, start_at, end_at,
                       flex_minutes, target, action_after_completion, description, client_token,
                       next_fire_at, due_at, created_at, modified_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (group_name, name) DO NOTHING;

-- name: schedule_columns
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at
FROM schedules;

-- name: replace_schedule
UPDATE schedules
SET state = ?, expression = ?, timezone = ?, start_at = ?, end_at = ?, flex_minutes = ?,
    target = ?, action_after_completion = ?, description = ?, next_fire_at = ?, due_at = ?,
    claim_token = NULL, modified_at = ?
WHERE group_name = ? AND name = ?;

-- name: delete_schedule
DELETE FROM schedules WHERE group_name = ? AND name = ?;

-- name: next_due_at
SELECT MIN(due_at) FROM schedules WHERE due_at IS NOT NULL;

-- name: claim_due
-- Claiming moves due_at to the end of the claim: if this node dies before completing,
-- the row becomes due again then and another dispatcher takes it (no rescuer needed).
UPDATE schedules SET due_at = ?, claim_token = ?
WHERE id IN (SELECT id FROM schedules WHERE due_at <= ? ORDER BY due_at LIMIT ?)
RETURNING id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
          target, action_after_completion, description, client_token, next_fire_at, due_at,
          last_fired_at, created_at, modified_at;

-- name: advance_schedule
-- Compare-and-set on the claim and the occurrence: an occurrence advances (fires) once.
UPDATE schedules SET next_fire_at = ?, due_at = ?, claim_token = NULL,
    last_fired_at = COALESCE(?, last_fired_at)
WHERE id = ? AND claim_token = ? AND next_fire_at = ?;

-- name: delete_fired_schedule
DELETE FROM schedules WHERE id = ? AND claim_token = ? AND next_fire_at = ?;

-- name: count_schedules
SELECT COUNT(*) FROM schedules;

-- ---------------------------------------------------------------------------------------
-- email

-- name: insert_template
INSERT INTO email_templates (name, subject, html, text, created_at, modified_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING;

-- name: update_template
UPDATE email_templates SET subject = ?, html = ?, text = ?, modified_at = ? WHERE name = ?;

-- name: template_columns
SELECT name, subject, html, text, created_at, modified_at FROM email_templates;

-- name: delete_template
DELETE FROM email_templates WHERE name = ?;

-- name: put_suppression
-- The first reason stays: re-adding an address keeps when and why it was first suppressed.
INSERT INTO suppressions (address, reason, created_at) VALUES (?, ?, ?)
ON CONFLICT (address) DO NOTHING;

-- name: delete_suppression
DELETE FROM suppressions WHERE address = ?;

-- name: suppression_columns
SELECT address, reason, created_at FROM suppressions;

-- name: insert_delivery
INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, sender,
                              recipients, state, detail, attempts, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING
RETURNING seq;

-- name: insert_delivery_recipient
INSERT INTO email_delivery_recipients (address, delivery_seq) VALUES (?, ?)
ON CONFLICT DO NOTHING;

-- name: update_delivery
-- Compare-and-set: only a QUEUED delivery changes (final states are final).
UPDATE email_deliveries SET state = ?, detail = ?, attempts = MAX(attempts, ?), updated_at = ?
WHERE id = ? AND state = 'QUEUED';

-- name: delivery_columns
SELECT d.seq, d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
       d.recipients, d.state, d.detail, d.attempts, d.created_at, d.updated_at
FROM email_deliveries d;

-- name: suppressed_among
SELECT address, reason, created_at FROM suppressions
WHERE address IN (SELECT value FROM json_each(?));

-- name: deliveries_by_id
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at
FROM email_deliveries WHERE id IN (SELECT value FROM json_each(?));

-- ---------------------------------------------------------------------------------------
-- campaigns (store/sqlite_campaigns.py)

-- name: insert_campaign
INSERT INTO campaigns (name, steps, template, status, created_at, modified_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING;

-- name: campaign_columns
SELECT name, steps, template, status, rows_read, schedules_created, row_errors, cancelled,
       created_at, modified_at
FROM campaigns;

-- name: update_campaign_steps
UPDATE campaigns SET steps = ?, modified_at = ? WHERE name = ?;

-- name: add_campaign_progress
-- A re-run reads the same rows again: rows read and row errors keep their highest count,
-- while schedules created add up (a re-run only creates what is missing).
UPDATE campaigns SET rows_read = MAX(rows_read, ?), row_errors = MAX(row_errors, ?),
    schedules_created = schedules_created + ?, modified_at = ?
WHERE name = ?;

-- name: set_campaign_status
UPDATE campaigns SET status = ?, modified_at = ? WHERE name = ?;

-- name: add_campaign_cancelled
UPDATE campaigns SET cancelled = cancelled + ?, modified_at = ? WHERE name = ?;

-- name: pause_group
UPDATE schedules SET state = 'DISABLED', due_at = NULL, modified_at = ?
WHERE group_name = ? AND state = 'ENABLED';

-- name: paused_page
SELECT name, next_fire_at, flex_minutes FROM schedules
WHERE group_name = ? AND state = 'DISABLED' AND name > ? ORDER BY name LIMIT ?;

-- name: enable_schedule
UPDATE schedules SET state = 'ENABLED', due_at = ?, modified_at = ?
WHERE group_name = ? AND name = ? AND state = 'DISABLED';

-- name: group_state_counts
SELECT state, COUNT(*) FROM schedules WHERE group_name = ? GROUP BY state;

-- name: delivery_state_counts
SELECT state, COUNT(*) FROM email_deliveries WHERE schedule >= ? AND schedule < ?
GROUP BY state;

-- name: firings_by_due
SELECT due_at / ?, json_extract(target, '$.kind'), COUNT(*) FROM schedules
WHERE due_at >= ? AND due_at < ? GROUP BY 1, 2;

-- name: firings_by_occurrence
SELECT next_fire_at / ?, json_extract(target, '$.kind'), COUNT(*) FROM schedules
WHERE due_at IS NOT NULL AND next_fire_at >= ? AND next_fire_at < ? GROUP BY 1, 2;

-- name: add_campaign_created
-- In the transaction that inserts the schedules: the count cannot drift from the rows.
UPDATE campaigns SET schedules_created = schedules_created + ? WHERE name = ?;
