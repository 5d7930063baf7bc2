-- 0014 network (PostgreSQL): each sandbox's network mode and rules.
--
-- Keep in step with ../sqlite/0014_network.sql, which explains the columns.

ALTER TABLE sandboxes ADD COLUMN network_mode TEXT NOT NULL DEFAULT 'none';
ALTER TABLE sandboxes ADD COLUMN network_rules TEXT NOT NULL DEFAULT '{}';
