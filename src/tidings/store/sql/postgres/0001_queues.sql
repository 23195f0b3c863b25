-- Queues and messages with SQS semantics. Instants are bigint UTC epoch milliseconds.

CREATE TABLE meta (
    key   text PRIMARY KEY,
    value bytea NOT NULL
);

CREATE TABLE queues (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    fifo        boolean NOT NULL,
    attributes  text NOT NULL,
    created_at  bigint NOT NULL,
    modified_at bigint NOT NULL,
    purged_at   bigint
);

-- Message totals per queue, spread over a few shard rows: every node's sends and deletes
-- add to a random shard, so they do not queue up behind one hot row lock.
CREATE TABLE queue_counts (
    queue_id bigint NOT NULL,
    shard    smallint NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (queue_id, shard)
);

CREATE TABLE messages (
    -- The id doubles as the FIFO SequenceNumber: an identity only grows.
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id          bigint NOT NULL,
    message_id        text NOT NULL,
    body              text NOT NULL,
    md5_body          text NOT NULL,
    attributes        text,
    md5_attributes    text,
    visible_at        bigint NOT NULL,
    lease_token       bigint,
    receive_count     integer NOT NULL DEFAULT 0 CHECK (receive_count >= 0),
    first_received_at bigint,
    sent_at           bigint NOT NULL,
    expires_at        bigint NOT NULL CHECK (expires_at >= sent_at),
    group_id          text,
    deduplication_id  text,
    source_queue_id   bigint,
    last_error        text,
    CHECK (receive_count = 0 OR lease_token IS NOT NULL)
);

CREATE INDEX messages_ready ON messages (queue_id, visible_at);
CREATE INDEX messages_expiry ON messages (expires_at);
CREATE INDEX messages_group ON messages (queue_id, group_id, visible_at) WHERE group_id IS NOT NULL;

CREATE TABLE fifo_dedup (
    queue_id         bigint NOT NULL,
    deduplication_id text NOT NULL,
    message_id       text NOT NULL,
    sequence_number  bigint,
    expires_at       bigint NOT NULL,
    PRIMARY KEY (queue_id, deduplication_id)
);

CREATE TABLE job_results (
    queue_id bigint NOT NULL,
    job_id   text NOT NULL,
    done_at  bigint NOT NULL,
    PRIMARY KEY (queue_id, job_id)
);
CREATE INDEX job_results_done_at ON job_results (done_at);

CREATE TABLE move_tasks (
    handle               text PRIMARY KEY,
    source_queue_id      bigint NOT NULL,
    destination_queue_id bigint,
    max_per_second       integer,
    status               text NOT NULL
        CHECK (status IN ('RUNNING', 'COMPLETED', 'CANCELLING', 'CANCELLED', 'FAILED')),
    moved                bigint NOT NULL DEFAULT 0,
    to_move              bigint NOT NULL DEFAULT 0,
    started_at           bigint NOT NULL,
    created_seq          bigint GENERATED ALWAYS AS IDENTITY,
    failure_reason       text
);
