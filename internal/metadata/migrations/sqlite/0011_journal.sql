-- 0011 journal (SQLite): multi-step operations, recorded before they change
-- anything, so that a cairnd killed in the middle of one can finish or undo
-- it at its next start, and so that the client can find out how it ended.
--
-- Keep in step with ../postgres/0011_journal.sql. Dialect differences as
-- in 0001 and 0007 (serial: SQLite's rowid alias, PostgreSQL: identity).
--
-- id is the operation's id (what GET /v1/operations/{id} takes); kind its
-- kind ('sandbox.fork'). owner is the lease owner of the cairnd instance
-- that runs it ('host/<host id>/<instance>'): at start a cairnd looks only
-- at the entries of its own host's earlier instances, never at another
-- host's, which may still be running them. sandbox_id is the sandbox the
-- operation works on ('' for none); children is a JSON array of the
-- sandboxes it makes, [{"id":"…","name":"…"}], written before the first
-- of them exists. state is 'running' until the operation ends: 'done',
-- 'failed' (it failed and undid itself), or 'undone' (it was interrupted
-- and the next start undid it); code (an API error code) and message say
-- why, for the last two.
-- Finished entries are deleted after a while (PruneJournal).

CREATE TABLE journal (
    serial     INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    kind       TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    account_id INTEGER NOT NULL REFERENCES accounts (id),
    sandbox_id TEXT    NOT NULL DEFAULT '',
    children   TEXT    NOT NULL DEFAULT '[]',
    state      TEXT    NOT NULL CHECK (state IN ('running', 'done', 'failed', 'undone')),
    code       TEXT    NOT NULL DEFAULT '',
    message    TEXT    NOT NULL DEFAULT '',
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
) STRICT;

CREATE INDEX journal_state_idx ON journal (state, created_at, serial);
