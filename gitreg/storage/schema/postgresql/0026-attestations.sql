-- The signed statement of each module version: a DSSE envelope (docs/verify.md),
-- written once, in the transaction that records the version (or by the backfill
-- for versions published before), and never changed.
CREATE TABLE module_attestations (
    module_id BIGINT NOT NULL,
    version_key TEXT NOT NULL,
    archive_sha256 TEXT NOT NULL,
    envelope TEXT NOT NULL,
    statement_sha256 TEXT NOT NULL,
    dir_hash TEXT NOT NULL,
    keyid TEXT NOT NULL,
    log_index BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (module_id, version_key)
);

-- Another version with the same archive bytes takes its dirHash from here.
CREATE INDEX module_attestations_archive ON module_attestations (archive_sha256);
