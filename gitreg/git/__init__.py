"""Git behind a narrow interface (`GitBackend`); dulwich implements it.

Why dulwich: see docs/git-backend.md (pure Python wheels, fetch over local,
https and ssh with the same code path, object access without a checkout).
"""
