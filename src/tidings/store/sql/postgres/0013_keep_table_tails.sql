-- VACUUM (autovacuum's, or the sweeper's where autovacuum is off) gives the empty pages at
-- the end of a table back to the filesystem, and to do so takes an ACCESS EXCLUSIVE lock
-- on the table: every receive, send, claim and firing on it waits until the truncation
-- is done (the soak's firings waited up to hundreds of milliseconds there, the database's
-- whole lateness tail). The tables that churn refill those pages within seconds anyway:
-- their space is reused in place instead, so the files stay at their peak, as SQLite's do.
ALTER TABLE messages SET (vacuum_truncate = false);
ALTER TABLE schedules SET (vacuum_truncate = false);
ALTER TABLE queue_counts SET (vacuum_truncate = false);
ALTER TABLE job_keys SET (vacuum_truncate = false);
ALTER TABLE fifo_dedup SET (vacuum_truncate = false);
ALTER TABLE firings SET (vacuum_truncate = false);
