CREATE TABLE module_docs (
    module_id INTEGER NOT NULL REFERENCES modules(id),
    version_key TEXT NOT NULL,
    format INTEGER NOT NULL,
    document TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (module_id, version_key)
);

CREATE TABLE module_search (
    module_id INTEGER PRIMARY KEY REFERENCES modules(id),
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    system TEXT NOT NULL,
    description TEXT NOT NULL,
    body TEXT NOT NULL
);

CREATE VIRTUAL TABLE module_search_fts USING fts5(
    namespace, name, system, description, body, tokenize = 'unicode61'
);

INSERT INTO module_search_fts (module_search_fts, rank)
    VALUES ('rank', 'bm25(4.0, 10.0, 4.0, 2.0, 1.0)');

CREATE INDEX module_search_name ON module_search (lower(name));
