-- Campaigns: the record fan-out keeps beside the schedules it creates (one schedule group
-- per campaign, named after it).

CREATE TABLE campaigns (
    name              TEXT PRIMARY KEY,
    steps             TEXT NOT NULL,   -- JSON list of {name, day, time, template}
    template          TEXT,            -- the default template of the steps
    status            TEXT NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED', 'CANCELLED')),
    rows_read         INTEGER NOT NULL DEFAULT 0,
    schedules_created INTEGER NOT NULL DEFAULT 0,
    row_errors        INTEGER NOT NULL DEFAULT 0,
    cancelled         INTEGER NOT NULL DEFAULT 0,  -- schedules removed by cancel
    created_at        INTEGER NOT NULL,
    modified_at       INTEGER NOT NULL
);

-- Campaign status counts the delivery log by schedule-group prefix ("campaign/…").
CREATE INDEX email_deliveries_schedule ON email_deliveries (schedule, state);
