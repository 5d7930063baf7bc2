-- 0016 images (PostgreSQL): the images cairn holds besides the built-in
-- ones (busybox, debian): pulled, imported or built.
--
-- Keep in step with ../sqlite/0016_images.sql, which explains the columns.
-- Dialect differences as in 0001.

CREATE TABLE images (
    name       TEXT        COLLATE "C" NOT NULL PRIMARY KEY,
    digest     TEXT        COLLATE "C" NOT NULL CHECK (length(digest) = 71 AND substr(digest, 1, 7) = 'sha256:'),
    source     TEXT        NOT NULL,
    config     TEXT        NOT NULL DEFAULT '{}',
    size_bytes BIGINT      NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    disk_path  TEXT        COLLATE "C" NOT NULL CHECK (disk_path <> ''),
    created_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX images_digest_idx ON images (digest, name);
