-- 0009 disk size (PostgreSQL): see ../sqlite/0009_disk_size.sql. BIGINT
-- for the size in bytes.

ALTER TABLE sandboxes ADD COLUMN disk_bytes BIGINT NOT NULL DEFAULT 0 CHECK (disk_bytes >= 0);
