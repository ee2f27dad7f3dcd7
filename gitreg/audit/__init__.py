"""The audit log: who did what, one append-only row per action (docs/audit.md)."""
