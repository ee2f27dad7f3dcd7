-- The transparency log (docs/verify.md): its entries, appended one writer at a
-- time in the transaction of the event each records, and the hashes its tiles
-- serve: level 0 the leaf hashes, level L the hash of each complete subtree of
-- 256^L leaves. Rows are only ever added.
CREATE TABLE tlog_entries (
    idx INTEGER PRIMARY KEY,
    entry TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE tlog_hashes (
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (level, idx)
);
