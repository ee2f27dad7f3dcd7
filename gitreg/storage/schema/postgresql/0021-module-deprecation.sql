ALTER TABLE module_versions ADD COLUMN deprecation_reason TEXT;

ALTER TABLE module_versions ADD COLUMN deprecation_link TEXT NOT NULL DEFAULT '';
