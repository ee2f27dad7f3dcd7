-- The semver guard's verdict on each module version compared with the
-- previous release of its major line (gitreg/semver_guard/): published
-- ('first', 'compatible', 'breaking', 'allowed') or refused under `enforce`
-- ('refused': the version has no module_versions row until allowed).
CREATE TABLE semver_checks (
    module_id INTEGER NOT NULL REFERENCES modules(id) ON DELETE CASCADE,
    version_key TEXT NOT NULL,
    version TEXT NOT NULL,
    tag TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    baseline TEXT NOT NULL,
    status TEXT NOT NULL,
    exemption TEXT NOT NULL,
    breaking INTEGER NOT NULL,
    changes TEXT NOT NULL,
    allowed_by TEXT NOT NULL DEFAULT '',
    allowed_at TEXT,
    checked_at TEXT NOT NULL,
    PRIMARY KEY (module_id, version_key)
);
