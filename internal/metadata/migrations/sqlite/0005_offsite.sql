-- 0005 off-site (SQLite): which manifest of the account's off-site
-- repository holds a checkpoint.
--
-- Keep in step with ../postgres/0005_offsite.sql. Dialect differences as in
-- 0001.
--
-- checkpoints.offsite_manifest is the 64-hex-digit name of the checkpoint's
-- manifest in the repository (docs/repository-format.md), set once the
-- upload committed it in at least one location. NULL: not uploaded yet (the
-- upload queue takes these, oldest first). Which locations hold it is the
-- repository's to say (their heads), not the store's: a location that was
-- down is brought up to date from the other without touching this row.
-- Existing checkpoints have none and are uploaded after the upgrade.

ALTER TABLE checkpoints ADD COLUMN offsite_manifest TEXT;
