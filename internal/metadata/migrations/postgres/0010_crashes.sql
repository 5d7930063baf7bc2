-- 0010 crashes (PostgreSQL): a sandbox that died, its restart policy, and
-- the last process its memory limit killed.
--
-- Keep in step with ../sqlite/0010_crashes.sql, which explains the
-- columns. Dialect differences as in 0001.

ALTER TABLE sandboxes ADD COLUMN restart_policy TEXT COLLATE "C" NOT NULL DEFAULT 'on-failure' CHECK (restart_policy IN ('on-failure', 'always', 'no'));
ALTER TABLE sandboxes ADD COLUMN crash_reason TEXT;
ALTER TABLE sandboxes ADD COLUMN crashed_at TIMESTAMPTZ;
ALTER TABLE sandboxes ADD COLUMN oom_process TEXT;
ALTER TABLE sandboxes ADD COLUMN oom_at TIMESTAMPTZ;
