-- 0014 network (PostgreSQL): each sandbox's network mode and rules, and the
-- mode a memory checkpoint was taken in.
--
-- Keep in step with ../sqlite/0014_network.sql, which explains the columns.

ALTER TABLE sandboxes ADD COLUMN network_mode TEXT NOT NULL DEFAULT 'none';
ALTER TABLE sandboxes ADD COLUMN network_rules TEXT NOT NULL DEFAULT '{}';
ALTER TABLE checkpoints ADD COLUMN memory_network TEXT NOT NULL DEFAULT '';
UPDATE checkpoints SET memory_network = 'none' WHERE memory_path <> '';
