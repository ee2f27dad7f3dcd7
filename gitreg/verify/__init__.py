"""`gitreg verify`: checking installed modules against the registry's signed
statements and its transparency log, and the lock file (docs/verify.md)."""
