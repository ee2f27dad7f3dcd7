-- When the start-up backfill of statements (gitreg/attestations/) last went
-- over every version published before them: later starts skip it, since every
-- version published since is signed as it is published. One row at most.
CREATE TABLE attestation_backfill (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    completed_at TEXT NOT NULL
);
