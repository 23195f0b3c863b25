-- Queues and messages with SQS semantics. Instants are integer UTC epoch milliseconds.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE queues (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    fifo          INTEGER NOT NULL CHECK (fifo IN (0, 1)),
    attributes    TEXT NOT NULL,                 -- QueueAttributes.to_json()
    created_at    INTEGER NOT NULL,
    modified_at   INTEGER NOT NULL,
    purged_at     INTEGER,
    -- Maintained in the same transaction as every insert/delete, so the per-queue
    -- counters are O(1) to read; only in-flight/delayed need an index range scan.
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0)
);

CREATE TABLE messages (
    -- The row id doubles as the FIFO SequenceNumber: AUTOINCREMENT never reuses one.
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id          INTEGER NOT NULL,
    message_id        TEXT NOT NULL,
    body              TEXT NOT NULL,
    md5_body          TEXT NOT NULL,
    attributes        TEXT,
    md5_attributes    TEXT,
    -- The lease: receivable when visible_at <= now. A receive sets visible_at to
    -- now + visibility timeout and a fresh lease_token, so an expired lease needs no
    -- rescuer: the row is simply visible again.
    visible_at        INTEGER NOT NULL,
    lease_token       INTEGER,
    receive_count     INTEGER NOT NULL DEFAULT 0 CHECK (receive_count >= 0),
    first_received_at INTEGER,
    sent_at           INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL CHECK (expires_at >= sent_at),
    group_id          TEXT,
    deduplication_id  TEXT,
    source_queue_id   INTEGER,                   -- set when dead-lettered: where it came from
    last_error        TEXT,
    CHECK (receive_count = 0 OR lease_token IS NOT NULL)
);

-- Shaped for receive: walk one queue's messages in visible_at order, stop at now.
CREATE INDEX messages_ready ON messages (queue_id, visible_at);
-- Retention sweeps delete in expiry order without scanning live rows.
CREATE INDEX messages_expiry ON messages (expires_at);
-- FIFO: "is anything of this group in flight?" must not scan the queue.
CREATE INDEX messages_group ON messages (queue_id, group_id, visible_at) WHERE group_id IS NOT NULL;

CREATE TABLE fifo_dedup (
    queue_id         INTEGER NOT NULL,
    deduplication_id TEXT NOT NULL,
    message_id       TEXT NOT NULL,
    sequence_number  INTEGER,
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (queue_id, deduplication_id)
) WITHOUT ROWID;

-- Idempotent consumers: a job id recorded here was handled; written in the same
-- transaction that deletes its message.
CREATE TABLE job_results (
    queue_id INTEGER NOT NULL,
    job_id   TEXT NOT NULL,
    done_at  INTEGER NOT NULL,
    PRIMARY KEY (queue_id, job_id)
) WITHOUT ROWID;
CREATE INDEX job_results_done_at ON job_results (done_at);

CREATE TABLE move_tasks (
    handle               TEXT PRIMARY KEY,
    source_queue_id      INTEGER NOT NULL,
    destination_queue_id INTEGER,
    max_per_second       INTEGER,
    status               TEXT NOT NULL
        CHECK (status IN ('RUNNING', 'COMPLETED', 'CANCELLING', 'CANCELLED', 'FAILED')),
    moved                INTEGER NOT NULL DEFAULT 0,
    to_move              INTEGER NOT NULL DEFAULT 0,
    started_at           INTEGER NOT NULL,
    failure_reason       TEXT
);
