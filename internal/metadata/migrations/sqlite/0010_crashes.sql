-- 0010 crashes (SQLite): a sandbox that died, its restart policy, and the
-- last process its memory limit killed.
--
-- Keep in step with ../postgres/0010_crashes.sql. Dialect differences as
-- in 0001.
--
-- sandboxes.state may now also be 'crashed' (0001 has no CHECK on it: the
-- store validates states).
--
-- sandboxes.restart_policy is what cairnd does when the sandbox dies:
-- 'on-failure' (start it again from its disk, with backoff and a limit),
-- 'always' (the same, also when it stopped by itself), 'no' (it stays
-- crashed). Existing sandboxes get 'on-failure', the default.
--
-- crash_reason / crashed_at: why and when the sandbox last died (NULL if
-- it never did). They stay after a restart, as the last crash.
--
-- oom_process / oom_at: the last process the sandbox's memory limit
-- killed inside it ("pid 42 (python3), 380 MiB"), and when (NULL if none).

ALTER TABLE sandboxes ADD COLUMN restart_policy TEXT NOT NULL DEFAULT 'on-failure' CHECK (restart_policy IN ('on-failure', 'always', 'no'));
ALTER TABLE sandboxes ADD COLUMN crash_reason TEXT;
ALTER TABLE sandboxes ADD COLUMN crashed_at TEXT;
ALTER TABLE sandboxes ADD COLUMN oom_process TEXT;
ALTER TABLE sandboxes ADD COLUMN oom_at TEXT;
