-- 0006 off-site deletes (PostgreSQL): manifests of the account's off-site
-- repository that this store had recorded and that are to be deleted.
--
-- Keep in step with ../sqlite/0006_offsite_deletes.sql, which explains the
-- table. Dialect differences as in 0001.

CREATE TABLE offsite_deletes (
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    manifest   TEXT   COLLATE "C" NOT NULL,
    PRIMARY KEY (account_id, manifest)
);
