-- 0002 checkpoints (PostgreSQL): the checkpoints table, and on sandboxes the
-- manual checkpoint counter and the checkpoints a sandbox's disk came from.
--
-- Keep in step with ../sqlite/0002_checkpoints.sql, which explains the
-- columns. Dialect differences as in 0001, plus: checkpoints.serial is an
-- identity column (SQLite: INTEGER PRIMARY KEY AUTOINCREMENT) and
-- has_memory is BOOLEAN (SQLite: INTEGER 0/1).
--
-- next_checkpoint is read and incremented with UPDATE … RETURNING in the
-- transaction that inserts the checkpoint: the row lock serializes manual
-- checkpoints of one sandbox, so each gets its own v-number.

ALTER TABLE sandboxes ADD COLUMN next_checkpoint    BIGINT NOT NULL DEFAULT 0 CHECK (next_checkpoint >= 0);
ALTER TABLE sandboxes ADD COLUMN current_checkpoint TEXT   COLLATE "C";
ALTER TABLE sandboxes ADD COLUMN source_checkpoint  TEXT   COLLATE "C";

CREATE TABLE checkpoints (
    serial         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id             TEXT        COLLATE "C" NOT NULL UNIQUE,
    account_id     BIGINT      NOT NULL REFERENCES accounts (id),
    sandbox_id     TEXT        COLLATE "C" NOT NULL,
    sandbox_name   TEXT        COLLATE "C" NOT NULL,
    seq            TEXT        COLLATE "C" NOT NULL,
    name           TEXT        COLLATE "C",
    trigger        TEXT        NOT NULL,
    consistency    TEXT        NOT NULL,
    comment        TEXT        NOT NULL DEFAULT '',
    label          TEXT        NOT NULL DEFAULT '',
    has_memory     BOOLEAN     NOT NULL DEFAULT FALSE,
    image          TEXT        NOT NULL,
    size_exclusive BIGINT      NOT NULL DEFAULT 0 CHECK (size_exclusive >= 0),
    size_total     BIGINT      NOT NULL DEFAULT 0 CHECK (size_total >= 0),
    created_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (sandbox_id, seq),
    UNIQUE (account_id, name)
);

CREATE INDEX checkpoints_account_idx ON checkpoints (account_id, created_at, serial);
CREATE INDEX checkpoints_sandbox_idx ON checkpoints (sandbox_id, created_at, serial);
