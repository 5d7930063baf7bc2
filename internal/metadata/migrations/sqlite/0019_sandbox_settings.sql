-- 0019 sandbox settings (SQLite): the defaults of a sandbox's processes
-- and its labels.
--
-- Keep in step with ../postgres/0019_sandbox_settings.sql.
--
-- sandboxes.settings is a JSON object {"env": ["K=V", ...], "user": "...",
-- "workdir": "...", "labels": {"k": "v", ...}}, as cairnd checked and
-- stored it (metadata.SandboxSettings); '{}' for a sandbox made before.

ALTER TABLE sandboxes ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
