-- 0009 disk size (SQLite): each sandbox's disk size, the most its root
-- subvolume may refer to (a btrfs quota-group limit cairnd sets at every
-- start), in bytes; 0 is no limit, which is what existing sandboxes keep
-- until an operator gives them one.
--
-- Keep in step with ../postgres/0009_disk_size.sql.

ALTER TABLE sandboxes ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (disk_bytes >= 0);
