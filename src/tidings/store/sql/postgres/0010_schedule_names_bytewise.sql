-- Schedule listings page by (group, name) in byte order (COLLATE "C"), as SQLite orders
-- them, so a page token means the same on both backends. The unique index was built with
-- the database's collation, which such an ORDER BY cannot use: every page sorted the whole
-- table (seconds at a few million schedules). Declaring the columns bytewise rebuilds that
-- index in the order the queries ask for, so a page is an index range again.
ALTER TABLE schedules
    ALTER COLUMN group_name TYPE text COLLATE "C",
    ALTER COLUMN name TYPE text COLLATE "C";
