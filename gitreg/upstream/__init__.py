"""Talking to other servers: the outbound HTTPS client and the addresses it refuses."""
