-- 0017 accounts, API tokens and the audit log (PostgreSQL).
--
-- Keep in step with ../sqlite/0017_accounts_tokens_audit.sql, which
-- explains the tables. Dialect differences as in 0001.

ALTER TABLE accounts ADD COLUMN disk_limit_bytes BIGINT NOT NULL DEFAULT 0 CHECK (disk_limit_bytes >= 0);

CREATE TABLE api_tokens (
    id           TEXT        COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) = 12),
    account_id   BIGINT      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name         TEXT        COLLATE "C" NOT NULL CHECK (name <> ''),
    role         TEXT        COLLATE "C" NOT NULL CHECK (role IN ('read', 'member', 'admin')),
    secret_hash  TEXT        COLLATE "C" NOT NULL CHECK (length(secret_hash) = 64),
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    UNIQUE (account_id, name)
);

CREATE TABLE audit_log (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         TIMESTAMPTZ NOT NULL,
    account_id BIGINT      REFERENCES accounts (id) ON DELETE SET NULL,
    token_id   TEXT        COLLATE "C" NOT NULL DEFAULT '',
    token_name TEXT        COLLATE "C" NOT NULL DEFAULT '',
    remote     TEXT        COLLATE "C" NOT NULL DEFAULT '',
    action     TEXT        COLLATE "C" NOT NULL CHECK (action <> ''),
    target     TEXT        COLLATE "C" NOT NULL DEFAULT '',
    outcome    TEXT        COLLATE "C" NOT NULL CHECK (outcome <> ''),
    detail     TEXT        COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX audit_log_account_at ON audit_log (account_id, at);
CREATE INDEX audit_log_at ON audit_log (at);
