-- 0017 accounts, API tokens and the audit log (SQLite).
--
-- Keep in step with ../postgres/0017_accounts_tokens_audit.sql. Dialect
-- differences as in 0001.
--
-- accounts.disk_limit_bytes is the account's own disk limit (0: the
-- host's default, cairnd --disk-limit).
--
-- api_tokens holds one row per API token: its public id (12 base32
-- characters, see internal/auth), the account it works in, a name unique
-- in that account, its role, and the SHA-256 of its secret (never the
-- secret). expires_at and revoked_at are NULL while they do not apply; a
-- revoked token's row stays so that the audit log keeps naming it, and
-- its name stays taken. Rows go with their account (ON DELETE CASCADE).
--
-- audit_log holds one row per change made through the API: when, in which
-- account (NULL for the host's own: accounts and images), by which token
-- (NULL and '' for the administrator's unix socket), from where, what
-- (action, e.g. "sandbox.create", and target, e.g. the sandbox's name),
-- and the outcome ("ok" or the error code). Rows are deleted past their
-- age by cairnd, never changed.

ALTER TABLE accounts ADD COLUMN disk_limit_bytes INTEGER NOT NULL DEFAULT 0 CHECK (disk_limit_bytes >= 0);

CREATE TABLE api_tokens (
    id           TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 12),
    account_id   INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL CHECK (name <> ''),
    role         TEXT    NOT NULL CHECK (role IN ('read', 'member', 'admin')),
    secret_hash  TEXT    NOT NULL CHECK (length(secret_hash) = 64),
    created_at   TEXT    NOT NULL,
    expires_at   TEXT,
    revoked_at   TEXT,
    last_used_at TEXT,
    UNIQUE (account_id, name)
) STRICT;

CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         TEXT    NOT NULL,
    account_id INTEGER REFERENCES accounts (id) ON DELETE SET NULL,
    token_id   TEXT    NOT NULL DEFAULT '',
    token_name TEXT    NOT NULL DEFAULT '',
    remote     TEXT    NOT NULL DEFAULT '',
    action     TEXT    NOT NULL CHECK (action <> ''),
    target     TEXT    NOT NULL DEFAULT '',
    outcome    TEXT    NOT NULL CHECK (outcome <> ''),
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX audit_log_account_at ON audit_log (account_id, at);
CREATE INDEX audit_log_at ON audit_log (at);
