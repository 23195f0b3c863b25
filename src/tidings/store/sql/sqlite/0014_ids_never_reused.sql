-- Row ids are never handed out twice. Without AUTOINCREMENT SQLite gives a new row the id
-- of the deleted row that had the highest one, and identities derived from a row id
-- outlive the row: a schedule's firings (execution ids, delivery job ids, FIFO
-- deduplication ids, its firing history, a stale completion's compare-and-set), a queue's
-- dead letters (their source queue) and move tasks. With AUTOINCREMENT the next id is
-- above every id ever issued (sqlite_sequence). SQLite sets AUTOINCREMENT only in CREATE
-- TABLE, so both tables are rebuilt (a one-off copy: about a second per million
-- schedules). The sequence starts above every id still named anywhere, so an id that
-- only a leftover row remembers is not issued again either.

CREATE TABLE schedules_new (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name              TEXT NOT NULL,
    name                    TEXT NOT NULL,
    state                   TEXT NOT NULL CHECK (state IN ('ENABLED', 'DISABLED')),
    expression              TEXT NOT NULL,
    timezone                TEXT NOT NULL,
    start_at                INTEGER,
    end_at                  INTEGER,
    flex_minutes            INTEGER CHECK (flex_minutes IS NULL OR flex_minutes BETWEEN 1 AND 1440),
    target                  TEXT NOT NULL,   -- JSON (Target.to_json): readable, never pickled
    action_after_completion TEXT NOT NULL CHECK (action_after_completion IN ('NONE', 'DELETE')),
    description             TEXT,
    client_token            TEXT,
    next_fire_at            INTEGER,         -- the next occurrence; NULL once completed
    -- When the dispatcher may take it: the occurrence plus its flexible-window offset, or,
    -- while a dispatcher holds it, the end of that claim. NULL when it cannot fire
    -- (disabled or completed), which keeps such rows out of the due index.
    due_at                  INTEGER,
    claim_token             INTEGER,
    last_fired_at           INTEGER,
    created_at              INTEGER NOT NULL,
    modified_at             INTEGER NOT NULL,
    UNIQUE (group_name, name),
    CHECK (due_at IS NULL OR (state = 'ENABLED' AND next_fire_at IS NOT NULL))
);
INSERT INTO schedules_new (id, group_name, name, state, expression, timezone, start_at, end_at,
                           flex_minutes, target, action_after_completion, description,
                           client_token, next_fire_at, due_at, claim_token, last_fired_at,
                           created_at, modified_at)
SELECT id, group_name, name, state, expression, timezone, start_at, end_at, flex_minutes,
       target, action_after_completion, description, client_token, next_fire_at, due_at,
       claim_token, last_fired_at, created_at, modified_at
FROM schedules;
DROP TABLE schedules;
ALTER TABLE schedules_new RENAME TO schedules;
CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;

CREATE TABLE queues_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    fifo        INTEGER NOT NULL CHECK (fifo IN (0, 1)),
    attributes  TEXT NOT NULL,                 -- QueueAttributes.to_json()
    created_at  INTEGER NOT NULL,
    modified_at INTEGER NOT NULL,
    purged_at   INTEGER
);
INSERT INTO queues_new (id, name, fifo, attributes, created_at, modified_at, purged_at)
SELECT id, name, fifo, attributes, created_at, modified_at, purged_at FROM queues;
DROP TABLE queues;
ALTER TABLE queues_new RENAME TO queues;

-- The sequences start above every id any row still names: a firing's history, a delivery
-- job on its way (the dispatcher writes its schedule's id into it), a dead letter's
-- source, a move task's queues, a queue's counters or job keys.
INSERT INTO sqlite_sequence (name, seq)
SELECT t, 0 FROM (SELECT 'schedules' AS t UNION ALL SELECT 'queues')
WHERE t NOT IN (SELECT name FROM sqlite_sequence);
UPDATE sqlite_sequence SET seq = (
    SELECT MAX(n) FROM (
        SELECT seq AS n
        UNION ALL SELECT MAX(id) FROM schedules
        UNION ALL SELECT MAX(schedule_id) FROM firings
        UNION ALL SELECT MAX(json_extract(body, '$.schedule_id')) FROM messages
                  WHERE queue_id IN (SELECT id FROM queues
                                     WHERE name IN ('tidings-deliveries', 'tidings-email'))
                    AND json_valid(body)))
WHERE name = 'schedules';
UPDATE sqlite_sequence SET seq = (
    SELECT MAX(n) FROM (
        SELECT seq AS n
        UNION ALL SELECT MAX(id) FROM queues
        UNION ALL SELECT MAX(queue_id) FROM messages
        UNION ALL SELECT MAX(source_queue_id) FROM messages
        UNION ALL SELECT MAX(source_queue_id) FROM move_tasks
        UNION ALL SELECT MAX(destination_queue_id) FROM move_tasks
        UNION ALL SELECT MAX(queue_id) FROM queue_counts
        UNION ALL SELECT MAX(queue_id) FROM job_keys
        UNION ALL SELECT MAX(queue_id) FROM fifo_dedup))
WHERE name = 'queues';
