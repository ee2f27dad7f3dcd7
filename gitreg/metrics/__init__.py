"""Prometheus metrics: what the rest of gitreg records, and `GET /metrics`."""
