CREATE TABLE mirror_indexes (
    provider_key TEXT PRIMARY KEY,
    hostname TEXT NOT NULL,
    namespace TEXT NOT NULL,
    type TEXT NOT NULL,
    versions TEXT NOT NULL,
    fetched_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE mirror_packages (
    provider_key TEXT NOT NULL,
    version TEXT NOT NULL,
    platform TEXT NOT NULL,
    filename TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size BIGINT NOT NULL,
    h1 TEXT NOT NULL,
    protocols TEXT NOT NULL,
    key_id TEXT NOT NULL,
    source_url TEXT NOT NULL,
    fetched_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (provider_key, version, platform)
);

CREATE INDEX mirror_packages_sha256 ON mirror_packages(sha256);
