-- Schedules with EventBridge Scheduler semantics.

CREATE TABLE schedule_groups (
    name        text PRIMARY KEY,
    created_at  bigint NOT NULL,
    modified_at bigint NOT NULL,
    tags        text NOT NULL DEFAULT '{}'
);
INSERT INTO schedule_groups (name, created_at, modified_at) VALUES ('default', 0, 0);

CREATE TABLE schedules (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name              text NOT NULL,
    name                    text NOT NULL,
    state                   text NOT NULL CHECK (state IN ('ENABLED', 'DISABLED')),
    expression              text NOT NULL,
    timezone                text NOT NULL,
    start_at                bigint,
    end_at                  bigint,
    flex_minutes            integer CHECK (flex_minutes IS NULL OR flex_minutes BETWEEN 1 AND 1440),
    target                  text NOT NULL,
    action_after_completion text NOT NULL CHECK (action_after_completion IN ('NONE', 'DELETE')),
    description             text,
    client_token            text,
    next_fire_at            bigint,
    due_at                  bigint,
    claim_token             bigint,
    last_fired_at           bigint,
    created_at              bigint NOT NULL,
    modified_at             bigint NOT NULL,
    UNIQUE (group_name, name),
    CHECK (due_at IS NULL OR (state = 'ENABLED' AND next_fire_at IS NOT NULL))
);

CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
