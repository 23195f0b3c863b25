-- A schedule's version: every write to its row adds one, and a firing pass's completion
-- compares it with the version the pass read (`FiringPass.complete`: a compare-and-set).
-- It takes over from modified_at in that role: two writes within one millisecond (or
-- under a frozen clock) leave modified_at as it was, so a completion planned from the row
-- as it was before the second write (a pause, an update) went through, firing what the
-- row no longer said. claim_token goes: a firing pass marks no row any more.
ALTER TABLE schedules ADD COLUMN version bigint NOT NULL DEFAULT 0;
ALTER TABLE schedules DROP COLUMN claim_token;
