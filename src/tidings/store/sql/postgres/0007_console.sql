-- What the console shows about the nodes themselves: each process that runs the engine
-- writes its row every few seconds (a heartbeat), with its activity of the last hour per
-- minute (firings, messages sent, lateness buckets, failed deliveries) as JSON, so any
-- node can draw charts for the whole cluster without a time-series database.
CREATE TABLE nodes (
    id         text PRIMARY KEY,
    host       text NOT NULL,
    pid        bigint NOT NULL,
    version    text NOT NULL,
    started_at bigint NOT NULL,
    seen_at    bigint NOT NULL,
    activity   text NOT NULL
);
CREATE INDEX nodes_seen ON nodes (seen_at);

-- Counts too costly to take on every page view (pending schedules among ten million,
-- email sent today): a node takes them now and then and keeps them here, with the instant
-- they were taken, which the console shows beside them.
CREATE TABLE console_counts (
    name     text PRIMARY KEY,
    value    text NOT NULL,
    taken_at bigint NOT NULL
);
