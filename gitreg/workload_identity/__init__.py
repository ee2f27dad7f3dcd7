"""Workload identity: CI jobs sign in with their platform's OIDC ID tokens (docs/ci.md)."""
