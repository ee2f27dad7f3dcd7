"""The semver guard: each module version's interface, the classified diff
between two versions, and the per-repository policy (off, warn, enforce) that
labels or refuses a breaking change in a minor or patch release (docs/semver-guard.md)."""
