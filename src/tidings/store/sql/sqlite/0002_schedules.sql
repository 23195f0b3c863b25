-- Schedules with EventBridge Scheduler semantics.

CREATE TABLE schedule_groups (
    name        TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    modified_at INTEGER NOT NULL,
    tags        TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO schedule_groups (name, created_at, modified_at) VALUES ('default', 0, 0);

CREATE TABLE schedules (
    id                      INTEGER PRIMARY KEY,
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

-- The dispatcher's claim walks this index from the earliest due instant.
CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
