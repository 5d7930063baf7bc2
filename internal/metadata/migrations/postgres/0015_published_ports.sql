-- 0015 published ports (PostgreSQL): the TCP ports inside a sandbox that
-- cairnd's port proxy forwards to, and each account's port token.
--
-- Keep in step with ../sqlite/0015_published_ports.sql, which explains
-- the tables. Dialect differences as in 0001 (booleans are BOOLEAN here).

CREATE TABLE published_ports (
    sandbox_id TEXT        COLLATE "C" NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    port       INTEGER     NOT NULL CHECK (port BETWEEN 1 AND 65535),
    public     BOOLEAN     NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (sandbox_id, port)
);

CREATE TABLE port_tokens (
    account_id BIGINT      NOT NULL PRIMARY KEY REFERENCES accounts (id),
    token      TEXT        NOT NULL CHECK (token <> ''),
    created_at TIMESTAMPTZ NOT NULL
);
