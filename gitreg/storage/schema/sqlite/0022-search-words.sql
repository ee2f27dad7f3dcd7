CREATE INDEX module_search_namespace ON module_search (lower(namespace));
