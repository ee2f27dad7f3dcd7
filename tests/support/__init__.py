"""Helpers for tests that drive real things: git, a gitreg server, Terraform."""
