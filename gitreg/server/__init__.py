"""`gitreg serve`: TLS, connection limits, the access log and the health endpoints."""
