"""Pull-through cache of public registry modules (docs/module-proxy.md)."""
