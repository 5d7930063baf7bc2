-- 0014 network (SQLite): each sandbox's network mode and rules.
--
-- Keep in step with ../postgres/0014_network.sql.
--
-- sandboxes.network_mode is 'none' (loopback only) or 'egress' (outbound
-- under the rules); sandboxes made before networking keep 'none', what
-- they had. sandboxes.network_rules is a JSON object {"allow": [...],
-- "deny": [...]} of IPv4 addresses, CIDRs and domain patterns, as the
-- user gave them (cairnd checks them before it stores them).

ALTER TABLE sandboxes ADD COLUMN network_mode TEXT NOT NULL DEFAULT 'none';
ALTER TABLE sandboxes ADD COLUMN network_rules TEXT NOT NULL DEFAULT '{}';
