"""Module `download` answers that point OpenTofu at `/v2/` instead of an archive.

OpenTofu 1.10 and later install `oci://HOST/REPO?digest=sha256:...` sources
(website/docs/language/modules/sources: "OCI Distribution Repository"): a
version the registry protocol resolved by semver is then fetched by its
manifest digest, which the client checks, as it checks every layer. Which
client asks is known only from its `User-Agent` (`OpenTofu/1.10.0`, see
internal/httpclient/useragent.go); Terraform and older OpenTofu keep the
archive URL.
"""

from __future__ import annotations

import re

_OPENTOFU = re.compile(rb"^OpenTofu/(\d+)\.(\d+)\.")
FIRST_WITH_OCI = (1, 10)


def reads_oci(user_agent: bytes | None) -> bool:
    """Whether the client is OpenTofu 1.10 or later."""
    found = _OPENTOFU.match(user_agent or b"")
    return found is not None and (int(found[1]), int(found[2])) >= FIRST_WITH_OCI


def oci_source(host: str, repository: str, subdir: str, digest: str) -> str:
    """`oci://HOST/REPO[//subdir]?digest=...`: go-getter's `//` selects the
    module's directory in the package, as it does in an archive URL."""
    return f"oci://{host}/{repository}" + (f"//{subdir}" if subdir else "") + f"?digest={digest}"
