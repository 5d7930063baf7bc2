-- 0019 sandbox settings (PostgreSQL): the defaults of a sandbox's
-- processes and its labels.
--
-- Keep in step with ../sqlite/0019_sandbox_settings.sql, which explains
-- the column.

ALTER TABLE sandboxes ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
