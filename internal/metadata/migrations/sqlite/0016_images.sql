-- 0016 images (SQLite): the images cairn holds besides the built-in ones
-- (busybox, debian): pulled from a registry, imported from an archive or
-- built from a Dockerfile.
--
-- Keep in step with ../postgres/0016_images.sql. Dialect differences as
-- in 0001.
--
-- One row per image, host-wide (images belong to no account). name is
-- what `cairn create --image NAME` takes, unique on the host. digest is
-- the manifest digest, 'sha256:' and 64 lower-case hex digits (for a
-- build: of its result). source says where it came from: the reference
-- pulled ('127.0.0.1:5000/app:1'), 'import:<file name>' or
-- 'build:<dir>'. config is a JSON object, the part of the OCI image config
-- cairn applies: {"env": [...], "entrypoint": [...], "cmd": [...],
-- "working_dir": "…", "user": "…", "exposed_ports": [80, ...]}, keys of
-- empty values left out. size_bytes is the size of its unpacked files;
-- disk_path its read-only subvolume, relative to the pool's root
-- ('images/<name>').
--
-- digest and disk_path are not unique: a second pull of the same digest
-- under another name names the first one's disk. Nothing refers to an
-- image by a foreign key: sandboxes.image and checkpoints.image hold its
-- name (or a built-in's), and the store counts them (ImageUsers) before
-- cairnd deletes it.

CREATE TABLE images (
    name       TEXT    NOT NULL PRIMARY KEY,
    digest     TEXT    NOT NULL CHECK (length(digest) = 71 AND substr(digest, 1, 7) = 'sha256:'),
    source     TEXT    NOT NULL,
    config     TEXT    NOT NULL DEFAULT '{}',
    size_bytes INTEGER NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    disk_path  TEXT    NOT NULL CHECK (disk_path <> ''),
    created_at TEXT    NOT NULL
) STRICT;

CREATE INDEX images_digest_idx ON images (digest, name);
