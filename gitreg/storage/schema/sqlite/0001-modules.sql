CREATE TABLE repos (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    forge_repo TEXT NOT NULL DEFAULT '',
    webhook_secret TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    last_fetch_at TEXT,
    last_fetch_error TEXT NOT NULL DEFAULT ''
);

CREATE INDEX repos_forge_repo ON repos(lower(forge_repo));

CREATE TABLE modules (
    id INTEGER PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repos(id),
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    system TEXT NOT NULL,
    address_key TEXT NOT NULL UNIQUE,
    subdir TEXT NOT NULL DEFAULT '',
    tag_prefix TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    last_sync_at TEXT,
    sync_report TEXT NOT NULL DEFAULT '[]'
);

CREATE TABLE module_versions (
    id INTEGER PRIMARY KEY,
    module_id INTEGER NOT NULL REFERENCES modules(id),
    version TEXT NOT NULL,
    version_key TEXT NOT NULL,
    tag TEXT NOT NULL,
    tag_sha TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    tree_sha TEXT NOT NULL,
    archive_sha256 TEXT NOT NULL,
    archive_size INTEGER NOT NULL,
    published_at TEXT NOT NULL,
    yanked INTEGER NOT NULL DEFAULT 0,
    UNIQUE (module_id, version_key)
);

CREATE TABLE module_conflicts (
    id INTEGER PRIMARY KEY,
    module_id INTEGER NOT NULL REFERENCES modules(id),
    version TEXT NOT NULL,
    tag TEXT NOT NULL,
    published_commit TEXT NOT NULL,
    seen_commit TEXT NOT NULL,
    reason TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    UNIQUE (module_id, tag, seen_commit)
);

CREATE TABLE archives (
    tree_sha TEXT NOT NULL,
    mtime INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (tree_sha, mtime)
);
