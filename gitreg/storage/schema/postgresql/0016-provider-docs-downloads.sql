CREATE TABLE provider_doc_sets (
    version_id BIGINT NOT NULL REFERENCES provider_versions(id),
    format BIGINT NOT NULL,
    listing TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (version_id)
);

CREATE TABLE provider_doc_pages (
    version_id BIGINT NOT NULL REFERENCES provider_versions(id),
    doc_id TEXT NOT NULL,
    html TEXT NOT NULL,
    PRIMARY KEY (version_id, doc_id)
);

CREATE TABLE download_counts (
    kind TEXT NOT NULL,
    object_id BIGINT NOT NULL,
    version TEXT NOT NULL,
    day TEXT NOT NULL,
    token_id BIGINT NOT NULL,
    downloads BIGINT NOT NULL
);

CREATE UNIQUE INDEX download_counts_key
    ON download_counts (kind, object_id, version, day, token_id);

CREATE TABLE download_totals (
    kind TEXT NOT NULL,
    object_id BIGINT NOT NULL,
    version TEXT NOT NULL,
    downloads BIGINT NOT NULL,
    PRIMARY KEY (kind, object_id, version)
);

ALTER TABLE module_search ADD COLUMN head_terms tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', namespace || ' ' || name || ' ' || system), 'A')
    || setweight(to_tsvector('simple', description), 'B')
) STORED;

CREATE INDEX module_search_head_terms ON module_search USING GIN (head_terms);
