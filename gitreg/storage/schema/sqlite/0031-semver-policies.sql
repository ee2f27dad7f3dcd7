-- A repository's semver policy ('off', 'warn', 'enforce'); no row: the
-- `semver_check` setting.
CREATE TABLE semver_policies (
    repo_id INTEGER PRIMARY KEY REFERENCES repos(id) ON DELETE CASCADE,
    policy TEXT NOT NULL
);
