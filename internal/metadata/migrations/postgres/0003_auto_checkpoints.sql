-- 0003 auto checkpoints (PostgreSQL): each sandbox's automatic checkpoint
-- interval, and the btrfs generation of the root a checkpoint left behind.
--
-- Keep in step with ../sqlite/0003_auto_checkpoints.sql, which explains the
-- columns. Dialect differences as in 0001. root_generation is BIGINT, signed
-- like SQLite's INTEGER: the store refuses generations past 2^63-1.

ALTER TABLE sandboxes   ADD COLUMN auto_checkpoint_seconds BIGINT NOT NULL DEFAULT 300 CHECK (auto_checkpoint_seconds > 0);

ALTER TABLE checkpoints ADD COLUMN root_generation         BIGINT NOT NULL DEFAULT 0   CHECK (root_generation >= 0);
