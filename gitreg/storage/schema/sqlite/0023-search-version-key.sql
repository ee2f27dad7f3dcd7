-- A search row records the key of the version whose words it holds: the module's
-- latest (gitreg.versions.latest). Rows stored before are NULL; `gitreg reindex`
-- rebuilds every row whose key is not the module's latest.
ALTER TABLE module_search ADD COLUMN version_key TEXT;
