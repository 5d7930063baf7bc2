-- 0021 hosts (SQLite): the cairnd hosts that share the metadata, and the
-- host of each sandbox and of each checkpoint's disk (issue 22).
--
-- Keep in step with ../postgres/0021_hosts.sql.
--
-- hosts: one row per cairnd host (its data dir's host-id), made or
-- updated at each start. api_address is its --listen address as the other
-- hosts dial it ('' without one), tls_fingerprint its certificate's (the
-- others pin it), peer_key_hash the SHA-256 (hex) of the key it signs the
-- requests it forwards with, made at each start. capacity is how many
-- running sandboxes it is meant for (0: unbounded). heartbeat_at is
-- renewed every few seconds; a host whose heartbeat is older than the
-- timeout is down.
--
-- sandboxes.host_id and checkpoints.host_id name the host whose pool
-- holds the sandbox's root and the checkpoint's disk; '' for rows made
-- before hosts existed, which the one host there was claims at its start.

CREATE TABLE hosts (
    id              TEXT NOT NULL PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    api_address     TEXT NOT NULL DEFAULT '',
    tls_fingerprint TEXT NOT NULL DEFAULT '',
    peer_key_hash   TEXT NOT NULL DEFAULT '',
    capacity        INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT NOT NULL,
    heartbeat_at    TEXT NOT NULL
);

ALTER TABLE sandboxes ADD COLUMN host_id TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN host_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_host ON sandboxes (host_id);
CREATE INDEX checkpoints_host ON checkpoints (host_id);
ALTER TABLE disk_deletes ADD COLUMN host_id TEXT NOT NULL DEFAULT '';
