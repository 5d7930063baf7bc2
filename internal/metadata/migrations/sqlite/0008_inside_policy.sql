-- 0008 inside policy (SQLite): what processes inside a sandbox may create
-- through its management socket, and which checkpoints they made.
--
-- Keep in step with ../postgres/0008_inside_policy.sql. Dialect
-- differences as in 0001 (booleans are INTEGER 0/1 here).
--
-- sandboxes.inside_memory and inside_names allow memory checkpoints and
-- named checkpoints (snapshots) from inside; inside_per_minute is how many
-- checkpoints may be made from inside in any minute (0: none);
-- inside_keep is how many unnamed ones made from inside are kept, the
-- oldest deleted beyond it (0: no bound). Existing sandboxes get the
-- defaults of metadata.DefaultInsidePolicy: no memory, no names, 10 a
-- minute, 20 kept. Ranges beyond "not negative" are checked above the
-- store, so that they can change without a migration.
--
-- checkpoints.from_inside marks a checkpoint asked for from inside the
-- sandbox; existing checkpoints were not marked and count as made outside
-- (no trigger tells them apart: inside-made ones are manual).

ALTER TABLE sandboxes ADD COLUMN inside_memory INTEGER NOT NULL DEFAULT 0 CHECK (inside_memory IN (0, 1));
ALTER TABLE sandboxes ADD COLUMN inside_names INTEGER NOT NULL DEFAULT 0 CHECK (inside_names IN (0, 1));
ALTER TABLE sandboxes ADD COLUMN inside_per_minute INTEGER NOT NULL DEFAULT 10 CHECK (inside_per_minute >= 0);
ALTER TABLE sandboxes ADD COLUMN inside_keep INTEGER NOT NULL DEFAULT 20 CHECK (inside_keep >= 0);

ALTER TABLE checkpoints ADD COLUMN from_inside INTEGER NOT NULL DEFAULT 0 CHECK (from_inside IN (0, 1));
