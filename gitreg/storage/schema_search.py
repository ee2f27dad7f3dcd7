"""Migrations after schema.py's list, which is at its 500-line limit (0022 on).

0022 (issue 13, "Search over 10,000 modules: p99 under 20 ms" on PostgreSQL):
`module_search` rows are wide (README text, its tsvector with positions: about
1.6 kB a row stored compressed, 5 rows per 8 kB page), so a search that ranks
or tests thousands of rows read and decompressed the whole table. The words
search needs live in `module_search_words` instead: the namespace (for the
visibility check), `head_terms` (namespace, name, system, description, with
positions and weights, for ts_rank) and `words` (every column's words,
stripped of positions and weights, for "every word matches somewhere"): about
0.8 kB a row, uncompressed, 11 rows per page. An AFTER trigger fills it from
every write to `module_search`, so a replica still on the previous schema
during a rolling upgrade (docs/scale-out.md: migrations only add) keeps it
current too; deleting a search row deletes its words (ON DELETE CASCADE).
Its GIN indexes take each write directly (fastupdate off): with the default
pending list, every search after a burst of publishes (a reindex, a migration)
scans that unsorted list too until autovacuum merges it.
SQLite's FTS5 tables are narrow already (module_search_head); there, search
finds the modules of namespaces hidden from the reader through an index of
lower(namespace), to leave them out inside its queries (storage/catalog.py).
The function body is dollar-quoted (migrations.statements keeps it whole).
"""

from __future__ import annotations

SEARCH_MIGRATIONS: list[tuple[str, str]] = [
    (
        "0022-search-words",
        """
    /*postgresql*/ CREATE TABLE module_search_words (
        module_id BIGINT PRIMARY KEY REFERENCES module_search(module_id) ON DELETE CASCADE,
        namespace TEXT NOT NULL,
        head_terms tsvector NOT NULL,
        words tsvector NOT NULL
    );
    /*postgresql*/ INSERT INTO module_search_words (module_id, namespace, head_terms, words)
        SELECT module_id, namespace, head_terms, strip(terms) FROM module_search;
    /*postgresql*/ CREATE INDEX module_search_words_head ON module_search_words
        USING GIN (head_terms) WITH (fastupdate = off);
    /*postgresql*/ CREATE INDEX module_search_words_words ON module_search_words
        USING GIN (words) WITH (fastupdate = off);
    /*postgresql*/ CREATE FUNCTION module_search_words_put() RETURNS trigger
        LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO module_search_words (module_id, namespace, head_terms, words)
        VALUES (NEW.module_id, NEW.namespace, NEW.head_terms, strip(NEW.terms))
        ON CONFLICT (module_id) DO UPDATE SET namespace = EXCLUDED.namespace,
            head_terms = EXCLUDED.head_terms, words = EXCLUDED.words;
        RETURN NULL;
    END
    $$;
    /*postgresql*/ CREATE TRIGGER module_search_words_put
        AFTER INSERT OR UPDATE ON module_search
        FOR EACH ROW EXECUTE FUNCTION module_search_words_put();
    /*sqlite*/ CREATE INDEX module_search_namespace ON module_search (lower(namespace));
    """,
    ),
    (
        # 1 when the job's last attempt failed because storage (S3, the database)
        # was unavailable: a job `failed` that way is queued again by the next
        # submission for its repository (gitreg/storage/jobs.py, docs/webhooks.md).
        "0023-job-outage",
        """
    ALTER TABLE jobs ADD COLUMN outage INTEGER NOT NULL DEFAULT 0;
    """,
    ),
]
