CREATE TABLE providers (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    type TEXT NOT NULL,
    address_key TEXT NOT NULL UNIQUE,
    repo_id INTEGER REFERENCES repos(id),
    forge TEXT NOT NULL DEFAULT '',
    sign_releases INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    last_sync_at TEXT,
    last_sync_report TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX providers_repo ON providers(repo_id);

CREATE TABLE provider_keys (
    id INTEGER PRIMARY KEY,
    namespace_key TEXT NOT NULL,
    key_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    ascii_armor TEXT NOT NULL,
    algorithms TEXT NOT NULL,
    terraform_compatible INTEGER NOT NULL,
    origin TEXT NOT NULL,
    created_at TEXT NOT NULL,
    retired_at TEXT,
    UNIQUE (namespace_key, fingerprint)
);

CREATE TABLE provider_versions (
    id INTEGER PRIMARY KEY,
    provider_id INTEGER NOT NULL REFERENCES providers(id),
    version TEXT NOT NULL,
    protocols TEXT NOT NULL,
    shasums_filename TEXT NOT NULL,
    shasums_sha256 TEXT NOT NULL,
    signature_sha256 TEXT NOT NULL,
    key_id INTEGER NOT NULL REFERENCES provider_keys(id),
    signed_by TEXT NOT NULL,
    source TEXT NOT NULL,
    published_at TEXT NOT NULL,
    UNIQUE (provider_id, version)
);

CREATE TABLE provider_packages (
    version_id INTEGER NOT NULL REFERENCES provider_versions(id),
    os TEXT NOT NULL,
    arch TEXT NOT NULL,
    filename TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    h1 TEXT NOT NULL,
    PRIMARY KEY (version_id, os, arch)
);
