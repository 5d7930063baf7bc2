-- 0008 inside policy (PostgreSQL): what processes inside a sandbox may
-- create through its management socket, and which checkpoints they made.
--
-- Keep in step with ../sqlite/0008_inside_policy.sql, which explains the
-- columns. Dialect differences as in 0001 (booleans are BOOLEAN here).

ALTER TABLE sandboxes   ADD COLUMN inside_memory     BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sandboxes   ADD COLUMN inside_names      BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sandboxes   ADD COLUMN inside_per_minute INTEGER NOT NULL DEFAULT 10 CHECK (inside_per_minute >= 0);
ALTER TABLE sandboxes   ADD COLUMN inside_keep       INTEGER NOT NULL DEFAULT 20 CHECK (inside_keep >= 0);

ALTER TABLE checkpoints ADD COLUMN from_inside       BOOLEAN NOT NULL DEFAULT FALSE;
