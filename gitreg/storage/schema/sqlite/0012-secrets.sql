CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE secret_versions (
    id INTEGER PRIMARY KEY,
    last_version INTEGER NOT NULL
);

INSERT INTO secret_versions (id, last_version) VALUES (1, 0);
