-- The last firings of each schedule and their outcome, for the console's schedule page:
-- the dispatcher writes a queue target's rows in the transaction that fires it (one
-- statement per batch), the delivery path a webhook's, function's or email's when its
-- outcome is final. Bounded: the sweeper deletes rows older than a day, by id (ids grow
-- with time, so the oldest rows are the lowest ids and no index on `at` is needed).
CREATE TABLE firings (
    id          INTEGER PRIMARY KEY,
    schedule_id INTEGER NOT NULL,
    occurrence  INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    outcome     TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    detail      TEXT
);
CREATE INDEX firings_schedule ON firings (schedule_id, id);
