"""Pull-through cache of public registry modules (issue 17, docs/module-proxy.md)."""
