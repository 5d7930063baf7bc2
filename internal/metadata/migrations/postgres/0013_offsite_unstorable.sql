-- 0013 off-site unstorable (PostgreSQL): a checkpoint the off-site
-- repository cannot store, and why.
--
-- Keep in step with ../sqlite/0013_offsite_unstorable.sql, which explains
-- the column.

ALTER TABLE checkpoints ADD COLUMN offsite_unstorable TEXT NOT NULL DEFAULT '';
