-- 0002 checkpoints (SQLite): the checkpoints table, and on sandboxes the
-- manual checkpoint counter and the checkpoints a sandbox's disk came from.
--
-- Keep in step with ../postgres/0002_checkpoints.sql. Dialect differences as
-- in 0001, plus: checkpoints.serial is INTEGER PRIMARY KEY AUTOINCREMENT
-- (PostgreSQL: an identity column) and has_memory is INTEGER 0/1
-- (PostgreSQL: BOOLEAN).
--
-- sandboxes.next_checkpoint is the number of the next manual checkpoint id
-- (v<N>) of the sandbox. The store reads and increments it in the same
-- transaction that inserts the checkpoint, and never lowers it, so a
-- v-number is never given twice, even after its checkpoint is deleted.
-- Existing sandboxes have taken no checkpoint yet: they start at 0.
--
-- sandboxes.current_checkpoint (the checkpoint the disk was last restored or
-- forked from) and sandboxes.source_checkpoint (the checkpoint a fork or a
-- restore-as-new was made from) hold checkpoint ids, NULL for none.
--
-- checkpoints.sandbox_id has no foreign key on purpose: checkpoints outlive
-- their sandbox (sandbox_name keeps its name for listing). id is the
-- account-wide id the caller chose; serial only orders checkpoints taken
-- at the same instant by insertion. name is NULL for an unnamed
-- checkpoint, so UNIQUE (account_id, name) only binds named ones. trigger
-- and consistency are validated by the store, not by a CHECK (see 0001).

ALTER TABLE sandboxes ADD COLUMN next_checkpoint INTEGER NOT NULL DEFAULT 0 CHECK (next_checkpoint >= 0);
ALTER TABLE sandboxes ADD COLUMN current_checkpoint TEXT;
ALTER TABLE sandboxes ADD COLUMN source_checkpoint TEXT;

CREATE TABLE checkpoints (
    serial         INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT    NOT NULL UNIQUE,
    account_id     INTEGER NOT NULL REFERENCES accounts (id),
    sandbox_id     TEXT    NOT NULL,
    sandbox_name   TEXT    NOT NULL,
    seq            TEXT    NOT NULL,
    name           TEXT,
    trigger        TEXT    NOT NULL,
    consistency    TEXT    NOT NULL,
    comment        TEXT    NOT NULL DEFAULT '',
    label          TEXT    NOT NULL DEFAULT '',
    has_memory     INTEGER NOT NULL DEFAULT 0 CHECK (has_memory IN (0, 1)),
    image          TEXT    NOT NULL,
    size_exclusive INTEGER NOT NULL DEFAULT 0 CHECK (size_exclusive >= 0),
    size_total     INTEGER NOT NULL DEFAULT 0 CHECK (size_total >= 0),
    created_at     TEXT    NOT NULL,
    UNIQUE (sandbox_id, seq),
    UNIQUE (account_id, name)
) STRICT;

CREATE INDEX checkpoints_account_idx ON checkpoints (account_id, created_at, serial);
CREATE INDEX checkpoints_sandbox_idx ON checkpoints (sandbox_id, created_at, serial);
