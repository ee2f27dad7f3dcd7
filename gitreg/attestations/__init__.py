"""Signed provenance for every module version and the public log of what the
registry published, yanked, deprecated and which keys it signed with
(docs/verify.md)."""
