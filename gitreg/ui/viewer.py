"""Who is looking at a page, and what they may see.

A person signed in through the identity provider (gitreg/auth/pages.py) sees
what the grants of their session allow: the session is read from the index
at each request, so a sign-out on any replica ends it everywhere at once.
Without a session, a browser shows private content only when it presents a
read token, kept in an HttpOnly cookie set by the `/ui/token` form
(gitreg/auth/pages.py). The token is checked exactly as a Bearer token is
(gitreg/auth/service.py): same snapshot, same expiry. A cookie whose token is
unknown, revoked or expired counts as no token at all, and the page says so:
private namespaces are then answered as if they did not exist. A session
wins over a token cookie.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass

from starlette.requests import Request

from gitreg.api.credentials import client_address
from gitreg.api.services import services
from gitreg.audit.actor import Actor, act_as
from gitreg.auth.service import AccessSnapshot
from gitreg.auth.store import SessionRecord
from gitreg.auth.tokens import Principal, Scope

TOKEN_COOKIE = "gitreg_ui_token"  # noqa: S105 - a cookie name, not a secret
# `__Host-`: browsers keep it only when Secure, Path=/ and without Domain, so
# no sibling host can set or shadow it (RFC 6265bis 4.1.3.2).
SESSION_COOKIE = "__Host-gitreg_session"
_SESSION_KEY = "gitreg.ui_session"


@dataclass(frozen=True)
class Viewer:
    principal: Principal | None
    snapshot: AccessSnapshot
    token_rejected: bool = False  # a cookie came with a token that no longer works
    session: SessionRecord | None = None  # signed in through the identity provider

    def may_read(self, namespace: str) -> bool:
        if not self.snapshot.is_private(namespace):
            return True
        return self.principal is not None and self.principal.allows(Scope.read, namespace)

    @property
    def key(self) -> Hashable:
        """What decides which private namespaces this viewer sees: the part of
        a cached page's key that keeps one reader's page from another's. Pages
        name a signed-in person, so their pages are theirs alone."""
        if self.session is not None:
            grants = tuple(sorted(self.session.grants.items()))
            return ("session", self.session.subject, self.session.email, grants)
        if self.principal is None:
            return ("anonymous", self.token_rejected)
        if self.principal.grants is not None:  # a `terraform login` token
            return ("grants", tuple(sorted((n, int(s)) for n, s in self.principal.grants.items())))
        if not self.principal.namespaces:
            return ("every-namespace",)
        return tuple(sorted(self.principal.namespaces))

    @property
    def has_token(self) -> bool:
        """A read token is presented (and no session)."""
        return self.principal is not None and self.session is None

    @property
    def is_admin(self) -> bool:
        """Signed in with admin on every namespace: may see and revoke every token."""
        return self.session is not None and self.session.grants.get("*") == Scope.admin.name


def session_principal(session: SessionRecord) -> Principal | None:
    """What the session's grants allow, as a token's principal; None without grants."""
    if not session.grants:
        return None
    grants = {ns: Scope.parse(scope) for ns, scope in session.grants.items()}
    return Principal(0, max(grants.values()), frozenset(), session.expires_at, grants)


async def current_session(request: Request) -> SessionRecord | None:
    """The live session the request's cookie names, read once per request."""
    # Kept in the request's own scope: `request.state` may be the lifespan
    # state, shared by every request of the app.
    if _SESSION_KEY in request.scope:
        found: SessionRecord | None = request.scope[_SESSION_KEY]
        return found
    session_id = request.cookies.get(SESSION_COOKIE, "")
    found = await services(request).sign_in.session(session_id, time.time())
    request.scope[_SESSION_KEY] = found
    return found


async def current_viewer(request: Request) -> Viewer:
    snapshot = await services(request).access.snapshot()
    session = await current_session(request)
    if session is not None:
        # Whom the audit rows of this request name (the tokens page's changes).
        act_as(Actor("person", session.email or session.subject, client=client_address(request)))
        return Viewer(session_principal(session), snapshot, session=session)
    token = request.cookies.get(TOKEN_COOKIE, "")
    if not token:
        return Viewer(None, snapshot)
    found = snapshot.holder(token)
    if found is None:
        return Viewer(None, snapshot, token_rejected=True)
    request.state.token_id = found.token_id  # for the access line; never the token
    act_as(Actor("token", f"token #{found.token_id}", client=client_address(request)))
    return Viewer(found, snapshot)
