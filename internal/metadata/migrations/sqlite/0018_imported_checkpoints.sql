-- 0018 imported checkpoints (SQLite): when a checkpoint was read back from
-- the account's off-site repository by `cairn offsite import`.
--
-- Keep in step with ../postgres/0018_imported_checkpoints.sql.
--
-- checkpoints.imported_at is NULL for a checkpoint taken on this host, else
-- when ImportCheckpoint stored it. Retention counts a sandbox without a
-- row here as deleted 14 days after its final checkpoint: for imported
-- checkpoints (a dead host's), no earlier than their import, so that an
-- import never hands old checkpoints to retention at once.

ALTER TABLE checkpoints ADD COLUMN imported_at TEXT; -- NULL: taken on this host
