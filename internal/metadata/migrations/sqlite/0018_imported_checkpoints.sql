-- 0018 imported checkpoints (SQLite): when a checkpoint was read back from
-- the account's off-site repository by `cairn offsite import`.
--
-- Keep in step with ../postgres/0018_imported_checkpoints.sql.
--
-- checkpoints.imported_at is NULL for a checkpoint taken on this host, else
-- when ImportCheckpoint stored it. Retention deletes the checkpoints of a
-- sandbox without a row here 14 days after its final checkpoint, but never
-- imported ones (a lost host's, often the only copies left): only the user
-- deletes those.

ALTER TABLE checkpoints ADD COLUMN imported_at TEXT; -- NULL: taken on this host
