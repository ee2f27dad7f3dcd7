"""Download usage: counting downloads and answering who uses which version."""
