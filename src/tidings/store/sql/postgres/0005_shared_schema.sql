-- One schema on every backend (a test compares them). A move task is cancelled in one
-- compare-and-set: no CANCELLING status. `seq` orders tasks started in the same
-- millisecond (SQLite numbers them the same way).

ALTER TABLE move_tasks RENAME COLUMN created_seq TO seq;
UPDATE move_tasks SET status = 'CANCELLED' WHERE status = 'CANCELLING';
ALTER TABLE move_tasks DROP CONSTRAINT move_tasks_status_check;
ALTER TABLE move_tasks ADD CONSTRAINT move_tasks_status_check
    CHECK (status IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED'));
