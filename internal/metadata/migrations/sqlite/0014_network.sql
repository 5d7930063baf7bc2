-- 0014 network (SQLite): each sandbox's network mode and rules, and the
-- mode a memory checkpoint was taken in.
--
-- Keep in step with ../postgres/0014_network.sql.
--
-- sandboxes.network_mode is 'none' (loopback only) or 'egress' (outbound
-- under the rules); sandboxes made before networking keep 'none', what
-- they had. sandboxes.network_rules is a JSON object {"allow": [...],
-- "deny": [...]} of IPv4 addresses, CIDRs and domain patterns, as the
-- user gave them (cairnd checks them before it stores them).
--
-- checkpoints.memory_network is the network mode of the container whose
-- memory the checkpoint holds ('' for a disk checkpoint): a resume must
-- give the container the same network (an interface, or none), whatever
-- the sandbox's mode is now.

ALTER TABLE sandboxes ADD COLUMN network_mode TEXT NOT NULL DEFAULT 'none';
ALTER TABLE sandboxes ADD COLUMN network_rules TEXT NOT NULL DEFAULT '{}';
ALTER TABLE checkpoints ADD COLUMN memory_network TEXT NOT NULL DEFAULT '';
UPDATE checkpoints SET memory_network = 'none' WHERE memory_path <> '';
