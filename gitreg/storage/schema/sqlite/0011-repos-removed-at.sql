ALTER TABLE repos ADD COLUMN removed_at TEXT;
