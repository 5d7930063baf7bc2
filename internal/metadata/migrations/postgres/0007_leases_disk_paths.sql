-- 0007 leases, disk paths (PostgreSQL): leases of resources, where each
-- checkpoint's disk and memory image live in the pool, and the paths of the
-- pool that are to be deleted.
--
-- Keep in step with ../sqlite/0007_leases_disk_paths.sql, which explains
-- the columns and tables. Dialect differences as in 0001 and 0002, plus:
-- leases.serial and disk_deletes.serial are identity columns (SQLite: rowid
-- aliases), exclusive and revoked are BOOLEAN (SQLite: INTEGER 0/1).
--
-- With several hosts on one database, SQLite's write lock does not
-- serialize acquires: a PostgreSQL store must take a lock per resource in
-- the acquiring transaction (pg_advisory_xact_lock of a hash of the
-- resource, or SELECT … FOR UPDATE of a row per resource) before it looks
-- for conflicts, and likewise check a path against the other column and
-- disk_deletes under a lock. What the SQLite store does to make lease
-- writes cheap (they need not survive a power cut, see metadata.Store) is
-- SET LOCAL synchronous_commit = off in their transactions here.
--
-- disk_path and memory_path are relative to the pool of the host that
-- holds the disk. When several hosts have pools, the row will need the
-- host too (a later migration).

ALTER TABLE checkpoints ADD COLUMN disk_path   TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN memory_path TEXT COLLATE "C" NOT NULL DEFAULT '';

UPDATE checkpoints SET disk_path = 'checkpoints/' || id,
                       memory_path = CASE WHEN has_memory THEN 'memory/' || id ELSE '' END;

CREATE UNIQUE INDEX checkpoints_disk_path_idx   ON checkpoints (disk_path)   WHERE disk_path <> '';
CREATE UNIQUE INDEX checkpoints_memory_path_idx ON checkpoints (memory_path) WHERE memory_path <> '';

CREATE TABLE disk_deletes (
    serial        BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    path          TEXT        COLLATE "C" NOT NULL UNIQUE,
    checkpoint_id TEXT        COLLATE "C" NOT NULL,
    queued_at     TIMESTAMPTZ NOT NULL
);

CREATE INDEX disk_deletes_queued_idx ON disk_deletes (queued_at, serial);

CREATE TABLE leases (
    serial     BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT        COLLATE "C" NOT NULL UNIQUE,
    resource   TEXT        COLLATE "C" NOT NULL,
    exclusive  BOOLEAN     NOT NULL,
    owner      TEXT        COLLATE "C" NOT NULL,
    purpose    TEXT        NOT NULL DEFAULT '',
    revoked    BOOLEAN     NOT NULL DEFAULT FALSE,
    expires_at TIMESTAMPTZ NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX leases_resource_idx ON leases (resource, created_at, serial);
