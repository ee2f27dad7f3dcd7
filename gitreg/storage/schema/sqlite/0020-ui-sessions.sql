CREATE TABLE ui_sessions (
    id_hash TEXT PRIMARY KEY,
    subject TEXT NOT NULL,
    email TEXT NOT NULL,
    groups TEXT NOT NULL,
    grants TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);

CREATE INDEX ui_sessions_expires_at ON ui_sessions(expires_at);
