-- Job identities with a lease. A consumer reserves a job's key ('running', until the
-- lease runs out) before its handler runs, so a duplicate of the job that arrives
-- meanwhile waits instead of running too; the key becomes 'done' in the transaction that
-- deletes the job's message, and is forgotten after TIDINGS_JOB_MEMORY_S.
CREATE TABLE job_keys (
    queue_id    bigint NOT NULL,
    job_key     text NOT NULL,
    state       text NOT NULL CHECK (state IN ('running', 'done')),
    lease_token bigint,
    lease_until bigint,
    done_at     bigint,
    PRIMARY KEY (queue_id, job_key),
    CHECK ((state = 'done') = (done_at IS NOT NULL))
);
CREATE INDEX job_keys_done_at ON job_keys (done_at) WHERE done_at IS NOT NULL;
CREATE INDEX job_keys_lease ON job_keys (lease_until) WHERE state = 'running';

INSERT INTO job_keys (queue_id, job_key, state, done_at)
SELECT queue_id, job_id, 'done', done_at FROM job_results;
DROP TABLE job_results;

-- What a delivery was asked to send (the delivery job's document), so a failed delivery
-- can be put back in line (tidings email resend) after its schedule is gone.
ALTER TABLE email_deliveries ADD COLUMN document text;

-- The occurrence a schedule fired a message for: part of the job identity of what a
-- recurring schedule fires (each occurrence runs once; retries of one are recognised).
ALTER TABLE messages ADD COLUMN scheduled_at bigint;
