-- 1 when the job's last attempt failed because storage (S3, the database) was
-- unavailable: a job failed that way is queued again by the next submission for
-- its repository (docs/webhooks.md).
ALTER TABLE jobs ADD COLUMN outage INTEGER NOT NULL DEFAULT 0;
