CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    repo_id INTEGER NOT NULL REFERENCES repos(id),
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    source TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    deliveries INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    run_after REAL NOT NULL,
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_until REAL NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    last_error TEXT NOT NULL DEFAULT '',
    result TEXT NOT NULL DEFAULT ''
);

CREATE INDEX jobs_state ON jobs(state, run_after);

CREATE INDEX jobs_repo ON jobs(repo_id, state);

CREATE UNIQUE INDEX jobs_one_queued_per_repo ON jobs(repo_id) WHERE state = 'queued';

CREATE TABLE deliveries (
    source TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    repo_id INTEGER NOT NULL REFERENCES repos(id),
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    received_at REAL NOT NULL,
    PRIMARY KEY (source, delivery_id, repo_id)
);

CREATE INDEX deliveries_job ON deliveries(job_id);

CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    next_run REAL NOT NULL
);
