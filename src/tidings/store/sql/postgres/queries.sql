-- Named queries of the PostgreSQL store; each block starts with "-- name: <name>".
-- All values are bound parameters (%s, psycopg 3).

-- name: get_meta
SELECT value FROM meta WHERE key = %s;

-- name: put_meta_if_absent
INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING;

-- name: insert_queue
INSERT INTO queues (name, fifo, attributes, created_at, modified_at)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (name) DO NOTHING
RETURNING id;

-- name: queue_columns
SELECT id, name, attributes, created_at, modified_at, purged_at FROM queues;

-- name: update_queue
UPDATE queues SET attributes = %s, modified_at = %s WHERE name = %s;

-- name: delete_queue
DELETE FROM queues WHERE id = %s;

-- name: delete_queue_messages
DELETE FROM messages WHERE queue_id = %s;

-- name: delete_queue_dedup
DELETE FROM fifo_dedup WHERE queue_id = %s;

-- name: delete_queue_jobs
DELETE FROM job_results WHERE queue_id = %s;

-- name: delete_queue_counts
DELETE FROM queue_counts WHERE queue_id = %s;

-- name: purge_queue
UPDATE queues SET purged_at = %s WHERE id = %s;

-- name: add_count
INSERT INTO queue_counts (queue_id, shard, n) VALUES (%s, %s, %s)
ON CONFLICT (queue_id, shard) DO UPDATE SET n = queue_counts.n + excluded.n;

-- name: queue_total
SELECT COALESCE(SUM(n), 0) FROM queue_counts WHERE queue_id = %s;

-- name: not_visible_counts
SELECT COUNT(*) FILTER (WHERE lease_token IS NOT NULL), COUNT(*) FILTER (WHERE lease_token IS NULL)
FROM messages WHERE queue_id = %s AND visible_at > %s;

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
                      visible_at, sent_at, expires_at, group_id, deduplication_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id;

-- name: send_messages
-- A whole send in one statement (data-modifying CTEs all run): the rows, the counter and
-- the wake-up. Binary parameters: the arrays travel with no text escaping of the bodies.
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
SELECT pg_notify('tidings', %b);

-- name: copy_messages
COPY messages (queue_id, message_id, body, md5_body, attributes, md5_attributes,
               visible_at, sent_at, expires_at, group_id, deduplication_id) FROM STDIN;

-- name: receive_candidates
-- SKIP LOCKED: concurrent receivers on other nodes take other rows instead of waiting.
SELECT id, receive_count FROM messages
WHERE queue_id = %s AND visible_at <= %s AND expires_at > %s
ORDER BY visible_at
LIMIT %s
FOR UPDATE SKIP LOCKED;

-- name: lock_fifo_queue
-- FIFO receives of one queue are serialised (transaction-scoped advisory lock): the
-- "nothing of this group in flight" check must not race another node's receive.
SELECT pg_advisory_xact_lock(7133001, %s::int);

-- name: receive_candidates_fifo
SELECT m.id, m.receive_count FROM messages AS m
WHERE m.queue_id = %s AND m.visible_at <= %s AND m.expires_at > %s
  AND NOT EXISTS (
      SELECT 1 FROM messages AS b
      WHERE b.queue_id = m.queue_id AND b.group_id = m.group_id
        AND b.visible_at > %s AND b.lease_token IS NOT NULL)
ORDER BY m.id
LIMIT %s
FOR UPDATE SKIP LOCKED;

-- name: lease_messages
UPDATE messages
SET visible_at = %s, lease_token = %s, receive_count = receive_count + 1,
    first_received_at = COALESCE(first_received_at, %s)
WHERE id = ANY(%s) AND visible_at <= %s
RETURNING id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
          receive_count, first_received_at, sent_at, group_id, deduplication_id,
          source_queue_id, last_error;

-- name: dead_letter_messages
UPDATE messages
SET queue_id = %s, source_queue_id = queue_id, visible_at = %s, lease_token = NULL,
    receive_count = 0, first_received_at = NULL, expires_at = GREATEST(sent_at + %s, sent_at)
WHERE id = ANY(%s);

-- name: delete_message
DELETE FROM messages WHERE id = %s AND queue_id = %s AND lease_token = %s;

-- name: delete_messages
-- Delete by receipts and adjust the counter in one statement; RETURNING says which went.
WITH gone AS (
    DELETE FROM messages AS m
    USING unnest(%b::bigint[], %b::bigint[]) AS r(id, token)
    WHERE m.id = r.id AND m.queue_id = %b AND m.lease_token = r.token
    RETURNING m.id
), counted AS (
    INSERT INTO queue_counts (queue_id, shard, n)
    SELECT %b, %b, -COUNT(*) FROM gone HAVING COUNT(*) > 0
    ON CONFLICT (queue_id, shard) DO UPDATE SET n = queue_counts.n + excluded.n
)
SELECT id FROM gone;

-- name: receive_simple
-- The receive of a standard queue without a redrive policy: one statement.
UPDATE messages
SET visible_at = %b, lease_token = %b, receive_count = receive_count + 1,
    first_received_at = COALESCE(first_received_at, %b)
WHERE id IN (SELECT id FROM messages
             WHERE queue_id = %b AND visible_at <= %b AND expires_at > %b
             ORDER BY visible_at LIMIT %b
             FOR UPDATE SKIP LOCKED)
RETURNING id, lease_token, message_id, body, md5_body, attributes, md5_attributes,
          receive_count, first_received_at, sent_at, group_id, deduplication_id,
          source_queue_id, last_error;

-- name: change_visibility
UPDATE messages SET visible_at = %s, last_error = COALESCE(%s, last_error)
WHERE id = %s AND queue_id = %s AND lease_token = %s AND visible_at > %s;

-- name: put_job_result
INSERT INTO job_results (queue_id, job_id, done_at) VALUES (%s, %s, %s)
ON CONFLICT (queue_id, job_id) DO NOTHING;

-- name: job_done
SELECT job_id FROM job_results WHERE queue_id = %s AND job_id = ANY(%s);

-- name: next_visible_at
SELECT MIN(visible_at) FROM messages WHERE queue_id = %s AND visible_at > %s;

-- name: expire_messages
DELETE FROM messages WHERE id IN (
    SELECT id FROM messages WHERE expires_at <= %s ORDER BY expires_at LIMIT %s
    FOR UPDATE SKIP LOCKED)
RETURNING queue_id;

-- name: expire_dedup
DELETE FROM fifo_dedup WHERE expires_at <= %s;

-- name: forget_jobs
DELETE FROM job_results WHERE (queue_id, job_id) IN (
    SELECT queue_id, job_id FROM job_results WHERE done_at < %s LIMIT %s);

-- name: try_maintenance_lock
-- Maintenance runs on one node at a time: whoever holds this (transaction-scoped) lock
-- sweeps this round; when that node dies its lock dies with its transaction.
SELECT pg_try_advisory_xact_lock(7133002);

-- name: movable_messages
SELECT id, source_queue_id FROM messages WHERE queue_id = %s ORDER BY id LIMIT %s
FOR UPDATE SKIP LOCKED;

-- name: move_message
UPDATE messages
SET queue_id = %s, visible_at = %s, lease_token = NULL, receive_count = 0,
    first_received_at = NULL, source_queue_id = NULL
WHERE id = %s;

-- name: insert_move_task
INSERT INTO move_tasks (handle, source_queue_id, destination_queue_id, max_per_second, status,
                        moved, to_move, started_at, failure_reason)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: list_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE source_queue_id = %s ORDER BY started_at DESC, created_seq DESC LIMIT %s;

-- name: running_move_tasks
SELECT handle, source_queue_id, destination_queue_id, max_per_second, status, moved, to_move,
       started_at, failure_reason
FROM move_tasks WHERE status = 'RUNNING' ORDER BY started_at;

-- name: update_move_task
UPDATE move_tasks SET moved = %s, status = %s, failure_reason = %s
WHERE handle = %s AND status = 'RUNNING';

-- name: notify
SELECT pg_notify('tidings', %s);

-- ---------------------------------------------------------------------------------------
-- schedules

-- name: insert_group
INSERT INTO schedule_groups (name, created_at, modified_at, tags) VALUES (%s, %s, %s, %s)
ON CONFLICT (name) DO NOTHING;

-- name: group_columns
SELECT name, created_at, modified_at, tags FROM schedule_groups;

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

-- name: schedule_columns
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       last_fired_at, created_at, modified_at
FROM schedules;

-- name: replace_schedule
UPDATE schedules
SET state = %s, expression = %s, timezone = %s, start_at = %s, end_at = %s, flex_minutes = %s,
    target = %s, action_after_completion = %s, description = %s, next_fire_at = %s, due_at = %s,
    claim_token = NULL, modified_at = %s
WHERE group_name = %s AND name = %s;

-- name: delete_schedule
DELETE FROM schedules WHERE group_name = %s AND name = %s;

-- name: next_due_at
SELECT MIN(due_at) FROM schedules WHERE due_at IS NOT NULL;

-- name: claim_due
-- SKIP LOCKED lets several nodes claim disjoint batches at once.
UPDATE schedules SET due_at = %s, claim_token = %s
WHERE id IN (SELECT id FROM schedules WHERE due_at <= %s ORDER BY due_at LIMIT %s
             FOR UPDATE SKIP LOCKED)
RETURNING id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
          target, action_after_completion, description, client_token, next_fire_at, due_at,
          last_fired_at, created_at, modified_at;

-- name: advance_schedules
-- Compare-and-set on (claim token, occurrence) for a whole batch; RETURNING names the
-- schedules whose claim still held: only their messages are written.
UPDATE schedules AS s
SET next_fire_at = v.next_fire_at, due_at = v.due_at, claim_token = NULL,
    last_fired_at = COALESCE(v.fired_at, s.last_fired_at)
FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
            %s::bigint[]) AS v(id, token, occurrence, next_fire_at, due_at, fired_at)
WHERE s.id = v.id AND s.claim_token = v.token AND s.next_fire_at = v.occurrence
RETURNING s.id;

-- name: delete_fired_schedules
DELETE FROM schedules AS s
USING unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS v(id, token, occurrence)
WHERE s.id = v.id AND s.claim_token = v.token AND s.next_fire_at = v.occurrence
RETURNING s.id;

-- name: count_schedules
SELECT COUNT(*) FROM schedules;

-- ---------------------------------------------------------------------------------------
-- campaigns (store/postgres_campaigns.py)

-- name: insert_campaign
INSERT INTO campaigns (name, steps, template, status, created_at, modified_at)
VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING;

-- name: campaign_columns
SELECT name, steps, template, status, rows_read, schedules_created, row_errors, cancelled,
       created_at, modified_at
FROM campaigns;

-- name: update_campaign_steps
UPDATE campaigns SET steps = %s, modified_at = %s WHERE name = %s;

-- name: add_campaign_progress
-- A re-run reads the same rows again: rows read and row errors keep their highest count,
-- while schedules created add up (a re-run only creates what is missing).
UPDATE campaigns SET rows_read = GREATEST(rows_read, %s), row_errors = GREATEST(row_errors, %s),
    schedules_created = schedules_created + %s, modified_at = %s
WHERE name = %s;

-- name: set_campaign_status
UPDATE campaigns SET status = %s, modified_at = %s WHERE name = %s;

-- name: add_campaign_cancelled
UPDATE campaigns SET cancelled = cancelled + %s, modified_at = %s WHERE name = %s;

-- name: pause_group
UPDATE schedules SET state = 'DISABLED', due_at = NULL, modified_at = %s
WHERE group_name = %s AND state = 'ENABLED';

-- name: paused_page
SELECT name, next_fire_at, flex_minutes FROM schedules
WHERE group_name = %s AND state = 'DISABLED' AND name COLLATE "C" > %s
ORDER BY name COLLATE "C" LIMIT %s;

-- name: enable_schedules
UPDATE schedules AS s SET state = 'ENABLED', due_at = v.due_at, modified_at = %s
FROM unnest(%s::text[], %s::bigint[]) AS v(name, due_at)
WHERE s.group_name = %s AND s.name = v.name AND s.state = 'DISABLED';

-- name: delete_named_schedules
DELETE FROM schedules WHERE group_name = %s AND name = ANY(%s::text[]);

-- name: group_state_counts
SELECT state, COUNT(*) FROM schedules WHERE group_name = %s GROUP BY state;

-- name: delivery_state_counts
SELECT state, COUNT(*) FROM email_deliveries
WHERE schedule COLLATE "C" >= %s AND schedule COLLATE "C" < %s GROUP BY state;

-- name: firings_by_due
SELECT due_at / %s, target::json ->> 'kind', COUNT(*) FROM schedules
WHERE due_at >= %s AND due_at < %s GROUP BY 1, 2;

-- name: firings_by_occurrence
SELECT next_fire_at / %s, target::json ->> 'kind', COUNT(*) FROM schedules
WHERE due_at IS NOT NULL AND next_fire_at >= %s AND next_fire_at < %s GROUP BY 1, 2;

-- ---------------------------------------------------------------------------------------
-- email (store/postgres_email.py)

-- name: insert_template
INSERT INTO email_templates (name, subject, html, text, created_at, modified_at)
VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING;

-- name: update_template
UPDATE email_templates SET subject = %s, html = %s, text = %s, modified_at = %s WHERE name = %s;

-- name: template_columns
SELECT name, subject, html, text, created_at, modified_at FROM email_templates;

-- name: delete_template
DELETE FROM email_templates WHERE name = %s;

-- name: put_suppressions
-- The first reason stays: re-adding an address keeps when and why it was first suppressed.
INSERT INTO suppressions (address, reason, created_at)
SELECT a, %s, %s FROM unnest(%s::text[]) AS a
ON CONFLICT (address) DO NOTHING;

-- name: delete_suppression
DELETE FROM suppressions WHERE address = %s;

-- name: suppression_columns
SELECT address, reason, created_at FROM suppressions;

-- name: insert_delivery
INSERT INTO email_deliveries (id, message_id, execution_id, schedule, template, sender,
                              recipients, state, detail, attempts, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING
RETURNING seq;

-- name: insert_delivery_recipients
INSERT INTO email_delivery_recipients (address, delivery_seq)
SELECT a, %s FROM unnest(%s::text[]) AS a
ON CONFLICT DO NOTHING;

-- name: update_delivery
-- Compare-and-set: only a QUEUED delivery changes (final states are final).
UPDATE email_deliveries SET state = %s, detail = %s, attempts = GREATEST(attempts, %s),
    updated_at = %s
WHERE id = %s AND state = 'QUEUED';

-- name: delivery_columns
SELECT d.seq, d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
       d.recipients, d.state, d.detail, d.attempts, d.created_at, d.updated_at
FROM email_deliveries d;

-- name: suppressed_among
SELECT address, reason, created_at FROM suppressions WHERE address = ANY(%s);

-- name: deliveries_by_id
SELECT seq, id, message_id, execution_id, schedule, template, sender, recipients, state,
       detail, attempts, created_at, updated_at
FROM email_deliveries WHERE id = ANY(%s);

-- name: add_campaign_created
-- In the transaction that inserts the schedules: the count cannot drift from the rows.
UPDATE campaigns SET schedules_created = schedules_created + %s WHERE name = %s;
