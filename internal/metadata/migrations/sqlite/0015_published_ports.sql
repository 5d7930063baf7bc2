-- 0015 published ports (SQLite): the TCP ports inside a sandbox that
-- cairnd's port proxy forwards to, and each account's port token.
--
-- Keep in step with ../postgres/0015_published_ports.sql. Dialect
-- differences as in 0001 (booleans are INTEGER 0/1 here).
--
-- published_ports holds one row per published port of a sandbox: the port
-- inside (1-65535) and whether it is public (reachable without the
-- account's credentials) or private. Its rows go with their sandbox (ON
-- DELETE CASCADE; the store opens SQLite with foreign keys on). A later
-- migration that rebuilds the sandboxes table (create, copy, drop, rename)
-- must copy these rows aside first: dropping the old table deletes them.
--
-- port_tokens holds each account's port token: the secret a request to a
-- private port carries (as a bearer token or the cookie the proxy sets),
-- made on first need and replaced at once by a rotation.

CREATE TABLE published_ports (
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    port       INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
    public     INTEGER NOT NULL DEFAULT 0 CHECK (public IN (0, 1)),
    created_at TEXT    NOT NULL,
    PRIMARY KEY (sandbox_id, port)
) STRICT;

CREATE TABLE port_tokens (
    account_id INTEGER NOT NULL PRIMARY KEY REFERENCES accounts (id),
    token      TEXT    NOT NULL CHECK (token <> ''),
    created_at TEXT    NOT NULL
) STRICT;
