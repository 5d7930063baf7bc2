-- 0001 init (SQLite): accounts and sandboxes.
--
-- Keep in step with ../postgres/0001_init.sql: same version, same tables,
-- same columns, same meaning. Differences are dialect only:
--   * STRICT tables with INTEGER/REAL/TEXT (PostgreSQL: BIGINT, DOUBLE
--     PRECISION, TEXT COLLATE "C").
--   * Times are TEXT in the fixed-width UTC form 2006-01-02T15:04:05.000000Z,
--     which sorts as it reads (PostgreSQL: TIMESTAMPTZ).
--   * accounts.id is INTEGER PRIMARY KEY, SQLite's rowid alias (PostgreSQL:
--     an identity column). AUTOINCREMENT makes sure an id is never reused.
--
-- sandboxes.state is not constrained by a CHECK: adding a state later would
-- need a full table rebuild in SQLite. The store validates it instead.
-- sandboxes.parent_id has no foreign key on purpose: a fork outlives its
-- parent and keeps its lineage.

CREATE TABLE accounts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE,
    created_at TEXT    NOT NULL
) STRICT;

CREATE TABLE sandboxes (
    id           TEXT    NOT NULL PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts (id),
    name         TEXT    NOT NULL,
    image        TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    cpus         REAL    NOT NULL DEFAULT 0 CHECK (cpus >= 0),
    memory_bytes INTEGER NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    parent_id    TEXT,
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    UNIQUE (account_id, name)
) STRICT;

CREATE INDEX sandboxes_parent_idx ON sandboxes (account_id, parent_id);
