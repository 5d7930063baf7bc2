-- 0012 journal detail (SQLite): what an interrupted operation's recovery
-- needs to know beyond the sandboxes it makes.
--
-- Keep in step with ../postgres/0012_journal_detail.sql.
--
-- detail is a JSON object of the operation's kind ('' for none): a restore
-- in place records the checkpoint it restores, the btrfs subvolume id of
-- the root it replaces (so that the next start can tell whether the new
-- root was swapped in) and whether the processes resume from memory; a
-- delete records the sandbox's name. Entries of 0011 have ''.

ALTER TABLE journal ADD COLUMN detail TEXT NOT NULL DEFAULT '';
