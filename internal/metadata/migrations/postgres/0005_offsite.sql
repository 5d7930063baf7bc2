-- 0005 off-site (PostgreSQL): which manifest of the account's off-site
-- repository holds a checkpoint.
--
-- Keep in step with ../sqlite/0005_offsite.sql, which explains the column.
-- Dialect differences as in 0001.

ALTER TABLE checkpoints ADD COLUMN offsite_manifest TEXT COLLATE "C";
