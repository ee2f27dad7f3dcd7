"""Secrets given by reference in settings and the config file: `env:NAME`,
`file:/path`, or the literal value.

Shared by webhooks (delivery secrets) and forges (API tokens,
docs/providers.md "Forges"), so it lives in neither.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

# The logger keeps the name it had when this lived in gitreg.webhooks.signatures,
# so log filters set up for it keep matching.
log = logging.getLogger("gitreg.webhooks")


def resolve_secret(reference: str) -> str:
    """A secret from its configured form: `env:NAME`, `file:/path`, or literal.

    Read on every use, so rotating a file or variable needs no restart. A
    reference that cannot be read yields "" and so refuses deliveries;
    the reason is logged, the secret never is.
    """
    if reference.startswith("env:"):
        name = reference[4:]
        value = os.environ.get(name, "")
        if not value:
            log.warning("webhook secret variable %s is unset or empty", name)
        return value
    if reference.startswith("file:"):
        path = Path(reference[5:]).expanduser()
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read webhook secret file %s: %s", path, exc)
            return ""
        if not value:
            log.warning("webhook secret file %s is empty", path)
        return value
    return reference
