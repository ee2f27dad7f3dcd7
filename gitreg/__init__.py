"""gitreg: a self-hosted Terraform registry that publishes from Git."""

__version__ = "0.1.0"
