"""Who a request says it is from, in the words of the access policy."""

from __future__ import annotations

from starlette.requests import Request

from gitreg.auth.service import Credentials


def client_address(request: Request) -> str:
    """The address the access log shows for `request`, which keys the per-client
    limits: uvicorn puts the forwarded one there when `trust_forwarded` is on
    (gitreg/server/cli.py)."""
    return request.client.host if request.client else "unknown"


def credentials(request: Request) -> Credentials:
    """The request's `Credentials`, built on first use and kept for the request.
    A token that authenticates leaves its id for the access line."""
    found = getattr(request.state, "credentials", None)
    if isinstance(found, Credentials):
        return found

    def note(token_id: int) -> None:
        request.state.token_id = token_id

    made = Credentials(
        request.headers.get("authorization"),
        client_address(request),
        request.url.path,
        request.query_params,
        note,
    )
    request.state.credentials = made
    return made
