CREATE INDEX modules_repo ON modules(repo_id);
