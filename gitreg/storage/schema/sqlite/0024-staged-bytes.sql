-- The bytes each staged CI upload holds or has reserved, one row per file being
-- received or stored: the staging quotas are checked and reserved against these
-- rows in one write transaction, so replicas sharing the index cannot each use the room.
CREATE TABLE staged_bytes (
    id INTEGER PRIMARY KEY,
    upload_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    token_id INTEGER,
    bytes INTEGER NOT NULL,
    stored INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);

CREATE INDEX staged_bytes_upload ON staged_bytes (upload_id);

CREATE INDEX staged_bytes_token ON staged_bytes (token_id);
