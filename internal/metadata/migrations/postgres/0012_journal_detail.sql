-- 0012 journal detail (PostgreSQL): what an interrupted operation's
-- recovery needs to know beyond the sandboxes it makes.
--
-- Keep in step with ../sqlite/0012_journal_detail.sql, which explains the
-- column.

ALTER TABLE journal ADD COLUMN detail TEXT NOT NULL DEFAULT '';
