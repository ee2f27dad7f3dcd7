ALTER TABLE api_tokens ADD COLUMN subject TEXT NOT NULL DEFAULT '';

ALTER TABLE api_tokens ADD COLUMN email TEXT NOT NULL DEFAULT '';

ALTER TABLE api_tokens ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';

ALTER TABLE api_tokens ADD COLUMN grants TEXT;

CREATE TABLE login_states (
    key TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    expires_at REAL NOT NULL
);

CREATE INDEX login_states_expires_at ON login_states(expires_at);
