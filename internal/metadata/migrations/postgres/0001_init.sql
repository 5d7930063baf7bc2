-- 0001 init (PostgreSQL): accounts and sandboxes.
--
-- Keep in step with ../sqlite/0001_init.sql: same version, same tables,
-- same columns, same meaning. Names use COLLATE "C" so that uniqueness and
-- ORDER BY name are byte-wise, as in SQLite, whatever the cluster's locale.
--
-- sandboxes.state is validated by the store, not by a CHECK (see the SQLite
-- file). sandboxes.parent_id has no foreign key on purpose: a fork outlives
-- its parent and keeps its lineage.

CREATE TABLE accounts (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       TEXT        COLLATE "C" NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE sandboxes (
    id           TEXT             COLLATE "C" NOT NULL PRIMARY KEY,
    account_id   BIGINT           NOT NULL REFERENCES accounts (id),
    name         TEXT             COLLATE "C" NOT NULL,
    image        TEXT             NOT NULL,
    state        TEXT             NOT NULL,
    cpus         DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (cpus >= 0),
    memory_bytes BIGINT           NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    parent_id    TEXT             COLLATE "C",
    created_at   TIMESTAMPTZ      NOT NULL,
    updated_at   TIMESTAMPTZ      NOT NULL,
    UNIQUE (account_id, name)
);

CREATE INDEX sandboxes_parent_idx ON sandboxes (account_id, parent_id);
