-- One schema on every backend (a test compares them): queue totals move from a column of
-- `queues` to `queue_counts`, the table PostgreSQL spreads over shard rows (SQLite, with
-- one writer, uses shard 0 only).

CREATE TABLE queue_counts (
    queue_id INTEGER NOT NULL,
    shard    INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (queue_id, shard)
) WITHOUT ROWID;

INSERT INTO queue_counts (queue_id, shard, n)
SELECT id, 0, message_count FROM queues WHERE message_count <> 0;

-- (A rebuild, not DROP COLUMN: SQLite cannot drop a column followed by comments in its
-- CREATE TABLE text.)
CREATE TABLE queues_new (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    fifo        INTEGER NOT NULL CHECK (fifo IN (0, 1)),
    attributes  TEXT NOT NULL,                 -- QueueAttributes.to_json()
    created_at  INTEGER NOT NULL,
    modified_at INTEGER NOT NULL,
    purged_at   INTEGER
);
INSERT INTO queues_new SELECT id, name, fifo, attributes, created_at, modified_at, purged_at
FROM queues;
DROP TABLE queues;
ALTER TABLE queues_new RENAME TO queues;

-- A message move task is cancelled in one compare-and-set: no CANCELLING status (SQLite
-- changes a CHECK constraint by rebuilding the table); `seq` orders tasks started in the
-- same millisecond, as on PostgreSQL.
CREATE TABLE move_tasks_new (
    handle               TEXT PRIMARY KEY,
    seq                  INTEGER NOT NULL,
    source_queue_id      INTEGER NOT NULL,
    destination_queue_id INTEGER,
    max_per_second       INTEGER,
    status               TEXT NOT NULL
        CHECK (status IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')),
    moved                INTEGER NOT NULL DEFAULT 0,
    to_move              INTEGER NOT NULL DEFAULT 0,
    started_at           INTEGER NOT NULL,
    failure_reason       TEXT
);
INSERT INTO move_tasks_new
SELECT handle, rowid, source_queue_id, destination_queue_id, max_per_second,
       CASE status WHEN 'CANCELLING' THEN 'CANCELLED' ELSE status END, moved, to_move,
       started_at, failure_reason
FROM move_tasks;
DROP TABLE move_tasks;
ALTER TABLE move_tasks_new RENAME TO move_tasks;
