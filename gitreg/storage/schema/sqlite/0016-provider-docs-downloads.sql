CREATE TABLE provider_doc_sets (
    version_id INTEGER NOT NULL REFERENCES provider_versions(id),
    format INTEGER NOT NULL,
    listing TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (version_id)
);

CREATE TABLE provider_doc_pages (
    version_id INTEGER NOT NULL REFERENCES provider_versions(id),
    doc_id TEXT NOT NULL,
    html TEXT NOT NULL,
    PRIMARY KEY (version_id, doc_id)
);

CREATE TABLE download_counts (
    kind TEXT NOT NULL,
    object_id INTEGER NOT NULL,
    version TEXT NOT NULL,
    day TEXT NOT NULL,
    token_id INTEGER NOT NULL,
    downloads INTEGER NOT NULL
);

CREATE UNIQUE INDEX download_counts_key
    ON download_counts (kind, object_id, version, day, token_id);

CREATE TABLE download_totals (
    kind TEXT NOT NULL,
    object_id INTEGER NOT NULL,
    version TEXT NOT NULL,
    downloads INTEGER NOT NULL,
    PRIMARY KEY (kind, object_id, version)
);

CREATE VIRTUAL TABLE module_search_head USING fts5(
    namespace, name, system, description, tokenize = 'unicode61'
);

INSERT INTO module_search_head (module_search_head, rank)
    VALUES ('rank', 'bm25(4.0, 10.0, 4.0, 2.0)');

INSERT INTO module_search_head (rowid, namespace, name, system, description)
    SELECT module_id, namespace, name, system, description FROM module_search;
