-- What the console shows about the nodes themselves: each process that runs the engine
-- writes its row every few seconds (a heartbeat), with its activity of the last hour per
-- minute (firings, messages sent, lateness buckets, failed deliveries) as JSON, so any
-- node can draw charts for the whole cluster without a time-series database.
CREATE TABLE nodes (
    id         TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    version    TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    activity   TEXT NOT NULL
);
CREATE INDEX nodes_seen ON nodes (seen_at);

-- Counts too costly to take on every page view (pending schedules among ten million,
-- email sent today): a node takes them now and then and keeps them here, with the instant
-- they were taken, which the console shows beside them.
CREATE TABLE console_counts (
    name     TEXT PRIMARY KEY,
    value    TEXT NOT NULL,
    taken_at INTEGER NOT NULL
);
