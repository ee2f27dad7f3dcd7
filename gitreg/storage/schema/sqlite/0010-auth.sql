CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    scope TEXT NOT NULL,
    namespaces TEXT NOT NULL DEFAULT '[]',
    description TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at REAL,
    revoked_at TEXT
);

CREATE TABLE namespace_access (
    namespace_key TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    private INTEGER NOT NULL
);
