-- 0003 auto checkpoints (SQLite): each sandbox's automatic checkpoint
-- interval, and the btrfs generation of the root a checkpoint left behind.
--
-- Keep in step with ../postgres/0003_auto_checkpoints.sql. Dialect
-- differences as in 0001.
--
-- sandboxes.auto_checkpoint_seconds is the interval of the sandbox's
-- automatic checkpoints, in whole seconds. The store never writes 0 (it
-- stands for the default when given, and is stored as 300); existing
-- sandboxes get the default, 300 s (5 minutes). Whether an interval is in
-- range (cairnd allows 60 s to 24 h) is checked above the store, not here,
-- so that the range can change without a migration.
--
-- checkpoints.root_generation is the btrfs generation of the sandbox's root
-- subvolume right after the checkpoint was taken, so cairnd can tell
-- whether the disk changed since. btrfs generations are unsigned 64-bit;
-- SQLite (like PostgreSQL's BIGINT) keeps signed 64-bit integers, so the
-- store refuses values past 2^63-1, which no real file system reaches.
-- Existing checkpoints get 0: unknown, treat the disk as changed.
--
-- The newest checkpoint of a sandbox (ORDER BY created_at DESC, serial
-- DESC) is found through checkpoints_sandbox_idx from 0002: no new index.

ALTER TABLE sandboxes ADD COLUMN auto_checkpoint_seconds INTEGER NOT NULL DEFAULT 300 CHECK (auto_checkpoint_seconds > 0);

ALTER TABLE checkpoints ADD COLUMN root_generation INTEGER NOT NULL DEFAULT 0 CHECK (root_generation >= 0);
