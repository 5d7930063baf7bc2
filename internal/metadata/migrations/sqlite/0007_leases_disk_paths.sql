-- 0007 leases, disk paths (SQLite): leases of resources (the work in flight
-- on a checkpoint's disk, the one lifecycle change at a time per sandbox),
-- where each checkpoint's disk and memory image live in the pool, and the
-- paths of the pool that are to be deleted.
--
-- Keep in step with ../postgres/0007_leases_disk_paths.sql. Dialect
-- differences as in 0001 and 0002, plus: leases.serial and
-- disk_deletes.serial are plain INTEGER PRIMARY KEYs, SQLite's rowid alias,
-- without AUTOINCREMENT (PostgreSQL: identity columns). A new rowid is
-- always past the largest one stored, which is all that ordering the rows
-- still there by insertion needs, and it spares every acquire a write of
-- sqlite_sequence.
--
-- checkpoints.disk_path and checkpoints.memory_path are relative to the
-- pool's root ('checkpoints/<id>', 'memory/<id>'); '' when the checkpoint
-- has no local copy of its disk (it is read off-site) or no memory image.
-- Nothing is found by probing the pool any more: the rows say. The store
-- checks that a path is relative, clean and inside the pool
-- (metadata.ValidatePoolPath) when it writes one and when it reads one, so
-- that no row makes cairnd touch a file outside the pool. Existing
-- checkpoints get the paths cairnd used before: 'checkpoints/<id>', and
-- 'memory/<id>' for those with memory. Which of them still have a local
-- copy is cairnd's to find out once, at its first start on this schema;
-- after that it records every change with SetCheckpointDisk.
--
-- A path is named by one checkpoint at most: the partial unique indexes
-- bind each column's paths that are not ''. The store's check in the
-- writing transaction keeps a path from being the disk of one checkpoint
-- and the memory image of another, and from being named while it is on
-- disk_deletes.
--
-- disk_deletes holds the paths that checkpoints named when they were
-- deleted or given another disk path, put here in the same transaction;
-- the disk component deletes them from the pool and then removes them
-- from here, oldest first (queued_at, then serial). It is the pool's
-- queue, not an account's: the pool holds the disks of every account.
--
-- leases: a lease is live while expires_at is after now (by the store's
-- clock; expired rows stay until the next acquire of their resource or a
-- reclaim deletes them). id is chosen by the caller. exclusive and revoked
-- are 0/1. Conflicts (exclusive against any live lease of the resource,
-- shared against a live exclusive one) are checked by the store in the
-- acquiring transaction, under the write lock; leases_resource_idx finds a
-- resource's leases in the order they are listed. Existing deployments
-- have no leases: the in-process locks of the cairnd that wrote them died
-- with it.

ALTER TABLE checkpoints ADD COLUMN disk_path   TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN memory_path TEXT NOT NULL DEFAULT '';

UPDATE checkpoints SET disk_path = 'checkpoints/' || id,
                       memory_path = CASE WHEN has_memory = 1 THEN 'memory/' || id ELSE '' END;

CREATE UNIQUE INDEX checkpoints_disk_path_idx   ON checkpoints (disk_path)   WHERE disk_path != '';
CREATE UNIQUE INDEX checkpoints_memory_path_idx ON checkpoints (memory_path) WHERE memory_path != '';

CREATE TABLE disk_deletes (
    serial        INTEGER PRIMARY KEY,
    path          TEXT    NOT NULL UNIQUE,
    checkpoint_id TEXT    NOT NULL,
    queued_at     TEXT    NOT NULL
) STRICT;

CREATE INDEX disk_deletes_queued_idx ON disk_deletes (queued_at, serial);

CREATE TABLE leases (
    serial     INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    resource   TEXT    NOT NULL,
    exclusive  INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
    owner      TEXT    NOT NULL,
    purpose    TEXT    NOT NULL DEFAULT '',
    revoked    INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1)),
    expires_at TEXT    NOT NULL,
    created_at TEXT    NOT NULL
) STRICT;

CREATE INDEX leases_resource_idx ON leases (resource, created_at, serial);
