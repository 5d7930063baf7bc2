-- 0018 imported checkpoints (PostgreSQL): when a checkpoint was read back
-- from the account's off-site repository.
--
-- Keep in step with ../sqlite/0018_imported_checkpoints.sql, which explains
-- the column.

ALTER TABLE checkpoints ADD COLUMN imported_at TIMESTAMPTZ; -- NULL: taken on this host
