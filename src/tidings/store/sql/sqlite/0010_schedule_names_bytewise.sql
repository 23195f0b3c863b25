-- PostgreSQL declares schedule names bytewise (COLLATE "C") here, so its (group, name)
-- index serves the listings' byte-order pages. SQLite compares text bytewise already
-- (BINARY): nothing to change.
SELECT 1;
