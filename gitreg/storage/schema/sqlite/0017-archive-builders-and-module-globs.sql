ALTER TABLE archives ADD COLUMN builder TEXT NOT NULL DEFAULT 'tar-pax+zlib-6';

ALTER TABLE modules ADD COLUMN archive_scope TEXT NOT NULL DEFAULT 'repository';

CREATE TABLE subtree_archives (
    subtree_sha TEXT NOT NULL,
    subdir TEXT NOT NULL,
    mtime INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    builder TEXT NOT NULL,
    PRIMARY KEY (subtree_sha, subdir)
);

CREATE TABLE module_globs (
    repo_id INTEGER NOT NULL REFERENCES repos(id),
    pattern TEXT NOT NULL,
    namespace TEXT NOT NULL,
    system TEXT NOT NULL,
    tag_pattern TEXT NOT NULL,
    archive_scope TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (repo_id, pattern)
);
