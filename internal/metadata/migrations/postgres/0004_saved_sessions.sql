-- 0004 saved sessions (PostgreSQL): the memory checkpoint a stopped sandbox
-- resumes from at its next start.
--
-- Keep in step with ../sqlite/0004_saved_sessions.sql, which explains the
-- column and the index. Dialect differences as in 0001.

ALTER TABLE sandboxes ADD COLUMN resume_checkpoint TEXT COLLATE "C";

CREATE INDEX sandboxes_resume_idx ON sandboxes (resume_checkpoint) WHERE resume_checkpoint IS NOT NULL;
