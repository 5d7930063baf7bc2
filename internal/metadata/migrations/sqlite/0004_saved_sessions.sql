-- 0004 saved sessions (SQLite): the memory checkpoint a stopped sandbox
-- resumes from at its next start.
--
-- Keep in step with ../postgres/0004_saved_sessions.sql. Dialect
-- differences as in 0001.
--
-- sandboxes.resume_checkpoint holds the id of the checkpoint (one with
-- memory, taken by cairn stop --snapshot) the sandbox resumes from instead
-- of cold-starting: a saved session. NULL (or '') for none; existing
-- sandboxes have none and cold-start, as before. Like current_checkpoint it
-- has no foreign key (checkpoints.id is unique but a sandbox row must not
-- block deleting a checkpoint): the store clears it in the transaction that
-- deletes the checkpoint it names, which finds the sandboxes through
-- sandboxes_resume_idx. The index is partial: almost every sandbox has
-- none.

ALTER TABLE sandboxes ADD COLUMN resume_checkpoint TEXT;

CREATE INDEX sandboxes_resume_idx ON sandboxes (resume_checkpoint) WHERE resume_checkpoint IS NOT NULL;
