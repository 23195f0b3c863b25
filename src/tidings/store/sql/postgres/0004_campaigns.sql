-- Campaigns: the record fan-out keeps beside the schedules it creates (one schedule group
-- per campaign, named after it).

CREATE TABLE campaigns (
    name              text PRIMARY KEY,
    steps             text NOT NULL,   -- JSON list of {name, day, time, template}
    template          text,            -- the default template of the steps
    status            text NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED', 'CANCELLED')),
    rows_read         bigint NOT NULL DEFAULT 0,
    schedules_created bigint NOT NULL DEFAULT 0,
    row_errors        bigint NOT NULL DEFAULT 0,
    cancelled         bigint NOT NULL DEFAULT 0,  -- schedules removed by cancel
    created_at        bigint NOT NULL,
    modified_at       bigint NOT NULL
);

-- Campaign status counts the delivery log by schedule-group prefix ("campaign/…"). The
-- delivery log comes with the email migration (0003); the index is made only when that
-- table exists, so this step also applies to a database migrated before email existed.
DO 'BEGIN
  IF to_regclass(''email_deliveries'') IS NOT NULL THEN
    CREATE INDEX IF NOT EXISTS email_deliveries_schedule
      ON email_deliveries (schedule COLLATE "C", state);
  END IF;
END';
