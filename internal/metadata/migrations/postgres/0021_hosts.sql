-- 0021 hosts (PostgreSQL): the cairnd hosts that share the metadata, and
-- the host of each sandbox and of each checkpoint's disk (issue 22).
--
-- Keep in step with ../sqlite/0021_hosts.sql, which explains the columns.

CREATE TABLE hosts (
    id              TEXT        COLLATE "C" NOT NULL PRIMARY KEY,
    name            TEXT        COLLATE "C" NOT NULL UNIQUE,
    api_address     TEXT        COLLATE "C" NOT NULL DEFAULT '',
    tls_fingerprint TEXT        COLLATE "C" NOT NULL DEFAULT '',
    peer_key_hash   TEXT        COLLATE "C" NOT NULL DEFAULT '',
    capacity        INTEGER     NOT NULL DEFAULT 0,
    started_at      TIMESTAMPTZ NOT NULL,
    heartbeat_at    TIMESTAMPTZ NOT NULL
);

ALTER TABLE sandboxes ADD COLUMN host_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN host_id TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX sandboxes_host ON sandboxes (host_id);
CREATE INDEX checkpoints_host ON checkpoints (host_id);
ALTER TABLE disk_deletes ADD COLUMN host_id TEXT COLLATE "C" NOT NULL DEFAULT '';
