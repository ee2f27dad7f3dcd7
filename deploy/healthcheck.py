"""The image's HEALTHCHECK: GET /healthz on this container's own gitreg.

Installed as `gitreg-healthcheck` by deploy/build-image.sh (the slim base has
no curl). It reads the same GITREG_* variables as `gitreg serve`: plain HTTP
with GITREG_NO_TLS, otherwise HTTPS verified against gitreg's local CA in the
data dir. With an operator's certificate (GITREG_TLS_CERT) the certificate names
the public host, not 127.0.0.1, and its CA may not be in the image: the check
then skips verification, which is safe because it only asks the loopback
interface whether this process answers (liveness), and sends no credentials.
Exit status 0 when /healthz answers 200, 1 otherwise (what HEALTHCHECK expects).
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

TRUE = ("1", "true", "yes", "on")


def _context(environ: Mapping[str, str]) -> ssl.SSLContext:
    data_dir = Path(environ.get("GITREG_DATA_DIR", "gitreg-data"))
    local_ca = data_dir / "tls" / "ca.pem"
    if not environ.get("GITREG_TLS_CERT") and local_ca.is_file():
        return ssl.create_default_context(cafile=str(local_ca))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def main() -> int:
    environ = os.environ
    port = environ.get("GITREG_PORT", "8443")
    plain = environ.get("GITREG_NO_TLS", "").strip().lower() in TRUE
    url = f"{'http' if plain else 'https'}://127.0.0.1:{port}/healthz"
    context = None if plain else _context(environ)
    try:
        with urllib.request.urlopen(url, timeout=4, context=context) as response:  # noqa: S310
            ok = response.status == 200
    except (OSError, urllib.error.URLError) as exc:
        print(f"gitreg-healthcheck: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
