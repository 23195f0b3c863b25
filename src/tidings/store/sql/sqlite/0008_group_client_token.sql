-- CreateScheduleGroup's ClientToken, remembered so that a retried create (same name, same
-- token) answers as the first did instead of ConflictException.
ALTER TABLE schedule_groups ADD COLUMN client_token TEXT;
