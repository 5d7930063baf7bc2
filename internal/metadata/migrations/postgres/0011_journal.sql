-- 0011 journal (PostgreSQL): multi-step operations, recorded before they
-- change anything.
--
-- Keep in step with ../sqlite/0011_journal.sql, which explains the
-- columns. Dialect differences as in 0001 and 0007.

CREATE TABLE journal (
    serial     BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT        COLLATE "C" NOT NULL UNIQUE,
    kind       TEXT        COLLATE "C" NOT NULL,
    owner      TEXT        COLLATE "C" NOT NULL,
    account_id BIGINT      NOT NULL REFERENCES accounts (id),
    sandbox_id TEXT        COLLATE "C" NOT NULL DEFAULT '',
    children   TEXT        NOT NULL DEFAULT '[]',
    state      TEXT        COLLATE "C" NOT NULL CHECK (state IN ('running', 'done', 'failed', 'undone')),
    code       TEXT        COLLATE "C" NOT NULL DEFAULT '',
    message    TEXT        NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX journal_state_idx ON journal (state, created_at, serial);
