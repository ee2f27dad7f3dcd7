"""Counting a download from its request: one call in each download handler.

The key is the path values as sent and the token id:
`DownloadCounter.add` is one dict increment, and resolving names to ids
happens when the counts are flushed (gitreg/usage/counter.py). The token
id is the one `Access.principal` already checked (private namespaces);
otherwise, only when the request carries an Authorization header, it is
looked up in the cached access snapshot, so an anonymous public download
costs no hashing at all. Both take the handler's `Services` rather than look
them up again through app.state, which every download would pay.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Scope

from gitreg.services import Services


def _token_id(scope: Scope, svc: Services) -> int:
    state = scope.get("state")
    if state and "token_id" in state:
        return int(state["token_id"])
    for name, value in scope["headers"]:
        if name == b"authorization":
            return svc.access.known_token_id(value.decode("latin-1"))
    return 0


def _counted(scope: Scope) -> bool:
    """A GET: a HEAD (Starlette answers it on every GET route) downloads nothing."""
    return bool(scope["method"] == "GET")


def count_module_download(request: Request, svc: Services) -> None:
    """After a module version's download answer was made (not for a 302 from
    the browse API's latest `/download`: Terraform follows it here).

    Names are lower-cased and build metadata dropped here, as the answer
    itself ignores both: otherwise `ACME/...` and `1.2.3+<random>` would each
    be a key of their own, and an anonymous client could fill the counter
    with keys of up to 256-byte versions (MAX_PENDING of them) between flushes."""
    scope = request.scope
    if not _counted(scope):
        return
    p = scope["path_params"]
    version = p["version"].partition("+")[0]
    key = (
        "module",
        p["namespace"].lower(),
        p["name"].lower(),
        p["system"].lower(),
        version,
        _token_id(scope, svc),
    )
    svc.downloads.add(key)


def count_provider_download(request: Request, svc: Services) -> None:
    """After a provider package's download answer was made."""
    scope = request.scope
    if not _counted(scope):
        return
    p = scope["path_params"]
    names = (p["namespace"].lower(), p["type"].lower())
    key = ("provider", *names, "", p["version"], _token_id(scope, svc))
    svc.downloads.add(key)
