-- 0006 off-site deletes (SQLite): manifests of the account's off-site
-- repository that this store had recorded and that are to be deleted.
--
-- Keep in step with ../postgres/0006_offsite_deletes.sql. Dialect
-- differences as in 0001.
--
-- Deleting a checkpoint row that names a manifest (or recording another
-- manifest in its place) puts the manifest here in the same transaction;
-- the upload queue deletes it from the repository and then removes it from
-- here. A manifest in the repository that no row names and that is not
-- here is not this store's to delete: another daemon's, or this store's
-- before it was lost (a new host pointed at the locations of one that
-- died), and it stays. Existing deployments: a manifest whose checkpoint
-- was deleted before the upgrade and is still in the repository is kept.

CREATE TABLE offsite_deletes (
    account_id INTEGER NOT NULL REFERENCES accounts (id),
    manifest   TEXT    NOT NULL,
    PRIMARY KEY (account_id, manifest)
) STRICT;
