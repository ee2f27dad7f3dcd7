"""`gitreg doctor`: what is misconfigured, before users find out."""
