CREATE TABLE module_search_words (
    module_id BIGINT PRIMARY KEY REFERENCES module_search(module_id) ON DELETE CASCADE,
    namespace TEXT NOT NULL,
    head_terms tsvector NOT NULL,
    words tsvector NOT NULL
);

INSERT INTO module_search_words (module_id, namespace, head_terms, words)
    SELECT module_id, namespace, head_terms, strip(terms) FROM module_search;

CREATE INDEX module_search_words_head ON module_search_words
    USING GIN (head_terms) WITH (fastupdate = off);

CREATE INDEX module_search_words_words ON module_search_words
    USING GIN (words) WITH (fastupdate = off);

CREATE FUNCTION module_search_words_put() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO module_search_words (module_id, namespace, head_terms, words)
    VALUES (NEW.module_id, NEW.namespace, NEW.head_terms, strip(NEW.terms))
    ON CONFLICT (module_id) DO UPDATE SET namespace = EXCLUDED.namespace,
        head_terms = EXCLUDED.head_terms, words = EXCLUDED.words;
    RETURN NULL;
END
$$;

CREATE TRIGGER module_search_words_put
    AFTER INSERT OR UPDATE ON module_search
    FOR EACH ROW EXECUTE FUNCTION module_search_words_put();
