-- Who asked for the job (an authenticated notification's token or workload
-- identity); the sync's audit rows name them. Webhooks and reconciles: system.
ALTER TABLE jobs ADD COLUMN actor_kind TEXT NOT NULL DEFAULT 'system';
ALTER TABLE jobs ADD COLUMN actor_name TEXT NOT NULL DEFAULT 'gitreg';
ALTER TABLE jobs ADD COLUMN actor_rule TEXT NOT NULL DEFAULT '';
