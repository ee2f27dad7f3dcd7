"""Who is looking at a page, and what they may see.

Until sign-in (issue 14), a browser shows private content only when it
presents a read token, kept in an HttpOnly cookie set by the `/ui/token`
form (gitreg/ui/token.py). The token is checked exactly as a Bearer token
is (gitreg/auth/access.py): same snapshot, same expiry. A cookie whose token
is unknown, revoked or expired counts as no token at all, and the page says
so: private namespaces are then answered as if they did not exist.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from starlette.requests import Request

from gitreg.auth.access import AccessSnapshot
from gitreg.auth.tokens import Principal, Scope, token_hash
from gitreg.services import services

TOKEN_COOKIE = "gitreg_ui_token"  # noqa: S105 - a cookie name, not a secret


@dataclass(frozen=True)
class Viewer:
    principal: Principal | None
    snapshot: AccessSnapshot
    token_rejected: bool = False  # a cookie came with a token that no longer works

    def may_read(self, namespace: str) -> bool:
        if not self.snapshot.is_private(namespace):
            return True
        return self.principal is not None and self.principal.allows(Scope.read, namespace)

    @property
    def key(self) -> Hashable:
        """What decides which private namespaces this viewer sees: the part of
        a cached page's key that keeps one reader's page from another's."""
        if self.principal is None:
            return ("anonymous", self.token_rejected)
        if not self.principal.namespaces:
            return ("every-namespace",)
        return tuple(sorted(self.principal.namespaces))

    @property
    def signed_in(self) -> bool:
        return self.principal is not None


def principal_for(snapshot: AccessSnapshot, token: str) -> Principal | None:
    found = snapshot.tokens.get(token_hash(token.strip()))
    if found is None or found.expired():
        return None
    return found


async def current_viewer(request: Request) -> Viewer:
    snapshot = await services(request).access.snapshot()
    token = request.cookies.get(TOKEN_COOKIE, "")
    if not token:
        return Viewer(None, snapshot)
    found = principal_for(snapshot, token)
    if found is None:
        return Viewer(None, snapshot, token_rejected=True)
    request.state.token_id = found.token_id  # for the access line; never the token
    return Viewer(found, snapshot)
