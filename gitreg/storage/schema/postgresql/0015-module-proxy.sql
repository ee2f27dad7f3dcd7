CREATE TABLE module_proxy_indexes (
    module_key TEXT PRIMARY KEY,
    versions TEXT NOT NULL,
    fetched_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE module_proxy_versions (
    module_key TEXT NOT NULL,
    version TEXT NOT NULL,
    host TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    system TEXT NOT NULL,
    location TEXT NOT NULL,
    git_url TEXT NOT NULL,
    ref TEXT NOT NULL,
    subdir TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    archive_sha256 TEXT NOT NULL,
    archive_size BIGINT NOT NULL,
    fetched_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (module_key, version)
);

CREATE TABLE module_proxy_moves (
    module_key TEXT NOT NULL,
    version TEXT NOT NULL,
    ref TEXT NOT NULL,
    cached_commit TEXT NOT NULL,
    upstream_commit TEXT NOT NULL,
    first_seen DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (module_key, version, upstream_commit)
);
