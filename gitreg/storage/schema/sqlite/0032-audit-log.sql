CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    actor_kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    rule TEXT NOT NULL DEFAULT '',
    action TEXT NOT NULL,
    object TEXT NOT NULL DEFAULT '',
    result TEXT NOT NULL,
    client TEXT NOT NULL DEFAULT '',
    request_id TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT ''
);

CREATE INDEX audit_log_at ON audit_log(at);
