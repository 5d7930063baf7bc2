-- 0013 off-site unstorable (SQLite): a checkpoint the off-site repository
-- cannot store, and why.
--
-- Keep in step with ../postgres/0013_offsite_unstorable.sql.
--
-- checkpoints.offsite_unstorable is '' for a checkpoint that can go
-- off-site (or has), else why its tree cannot be stored (a file type the
-- repository does not keep, a manifest over its bound): a reason no retry
-- changes, so the upload queue skips it for good, across restarts too,
-- and its off-site state shows "unstorable" with the reason.

ALTER TABLE checkpoints ADD COLUMN offsite_unstorable TEXT NOT NULL DEFAULT '';
