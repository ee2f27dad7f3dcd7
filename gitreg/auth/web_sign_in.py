"""Signing a person in to the web UI through the OpenID Connect issuer
(docs/ui.md, "Sign-in"), with the relying party of gitreg.auth.oidc.

1. `begin`: a fresh `state`, `nonce` and PKCE verifier (OpenID Connect Core
   3.1.2.1, RFC 7636), kept in the index as a pending sign-in together with
   the sha256 of a random *binding* value that only the browser holds (an
   HttpOnly cookie). The state alone is not enough: an attacker could start
   a sign-in, stop at the callback URL and send that URL to a victim, who
   would then be signed in as the attacker (login CSRF, RFC 6749 10.12).
2. `finish`: the pending sign-in is taken (once, on any replica), the callback
   must come from the browser holding its binding, the code is exchanged and
   the id_token validated (nonce included). Only then is a session created,
   under an id drawn now: no value the browser had before signing in is ever
   a session id (session fixation, OWASP ASVS 3.2.1), and the session the
   browser came with, if any, is deleted.

The session holds the person's subject, email and groups and the grants
computed from them at sign-in (gitreg.auth.grants); it ends `session_ttl`
seconds later or at sign-out, whichever comes first. Without `oidc_issuer`
both steps are NotFound; sessions made before it was removed are still read
until they end.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio.to_thread

from gitreg.auth.grants import effective
from gitreg.auth.oidc import IdTokenInvalid, OidcClient, new_secret
from gitreg.auth.pending import PENDING_TTL, SignInLimits, put_step, step_key, take_step
from gitreg.auth.store import AuthIndex, SessionRecord
from gitreg.auth.tokens import token_hash
from gitreg.errors import Forbidden, NotFound, UpstreamError
from gitreg.settings import Settings

log = logging.getLogger("gitreg.auth.web_sign_in")

_ORIGIN_RE = re.compile(
    r"https?://[A-Za-z0-9.\-]+(?::\d{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::\d{1,5})?"
)


class SignInFailed(Forbidden):
    """The sign-in cannot be finished; the message is shown to the person."""


@dataclass(frozen=True)
class SignedIn:
    session_id: str  # the cookie's value; stored only as its sha256
    session: SessionRecord
    next_path: str


def safe_next(path: str) -> str:
    """A path on this site to return to after sign-in; anything else is "/"
    (an open redirect would let a link send the person elsewhere)."""
    ok = path.startswith("/") and not path.startswith(("//", "/\\")) and len(path) <= 500
    return path if ok and all(32 < ord(c) < 127 for c in path) else "/"


class WebSignIn:
    def __init__(
        self,
        settings: Settings,
        store: AuthIndex,
        oidc: OidcClient,
        limits: SignInLimits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._limits = limits
        self._store = store
        self._oidc = oidc
        self._grants = settings.grants
        self._clock = clock

    @property
    def configured(self) -> bool:
        """Whether people can sign in here (an issuer is configured)."""
        return bool(self._settings.oidc_issuer)

    def _configured(self) -> None:
        if not self.configured:
            raise NotFound("sign-in is not configured on this registry (oidc_issuer)")

    async def form_target(self) -> str:
        """The origin of the issuer's authorization endpoint, which the sign-in
        form's POST redirects to: the page's CSP `form-action` must allow it,
        as browsers apply that directive to a form's redirects too (CSP 3,
        "form-action"). UpstreamError when the issuer cannot be reached."""
        self._configured()
        endpoint = urlsplit((await self._oidc.metadata()).authorization_endpoint)
        origin = f"{endpoint.scheme}://{endpoint.netloc.rpartition('@')[2]}"
        # A header value: nothing that could end the directive or add one.
        if not _ORIGIN_RE.fullmatch(origin):
            raise UpstreamError(f"identity provider: unusable authorization endpoint {origin!r}")
        return origin

    async def begin(self, callback_url: str, binding: str, next_path: str, client: str) -> str:
        """The issuer's authorization URL for a browser holding `binding`, at
        address `client`; SignInsBusy over the limits (gitreg.auth.pending)."""
        self._configured()
        state, nonce, verifier = new_secret(), new_secret(), new_secret()
        pending = {
            "nonce": nonce,
            "verifier": verifier,
            "callback": callback_url,
            "binding": token_hash(binding),
            "next": safe_next(next_path),
        }
        url = await self._oidc.authorization_url(callback_url, state, nonce, verifier)
        # Counted just before the write: with the issuer unreachable nothing is
        # written, so nothing is counted against the address.
        await self._limits.admit(client, self._clock())
        await put_step(self._store, step_key("web", state), pending, PENDING_TTL, self._clock())
        return url

    async def finish(
        self, params: Mapping[str, str], binding: str, previous_session: str = ""
    ) -> SignedIn:
        """The issuer's answer, in a browser holding `binding` and the session
        id `previous_session` (deleted once the new session exists); raises
        SignInFailed (or UpstreamError when the issuer cannot be reached)."""
        self._configured()
        key = step_key("web", params.get("state", ""))
        pending = await take_step(self._store, key, self._clock())
        if pending is None:
            raise SignInFailed("this sign-in is unknown, expired or already finished")
        if not hmac.compare_digest(pending["binding"], token_hash(binding)):
            raise SignInFailed("this sign-in was started in another browser")
        if "error" in params or "code" not in params:
            raise SignInFailed("the identity provider did not sign you in")
        try:
            who = await self._oidc.identify(
                params["code"], pending["callback"], pending["verifier"], pending["nonce"]
            )
        except IdTokenInvalid as exc:
            log.warning("web sign-in refused: %s", exc)  # names the check, never the token
            raise SignInFailed(str(exc)) from exc
        now = self._clock()
        session = SessionRecord(
            subject=who.subject,
            email=who.email,
            groups=who.groups,
            grants={ns: scope.name for ns, scope in effective(self._grants, who.groups).items()},
            csrf=new_secret(),
            created_at=now,
            expires_at=now + self._settings.session_ttl,
        )
        session_id = new_secret()
        await anyio.to_thread.run_sync(self._store.create_session, token_hash(session_id), session)
        await self.sign_out(previous_session)
        return SignedIn(session_id, session, pending["next"])

    async def session(self, session_id: str, now: float) -> SessionRecord | None:
        """The session a browser's cookie names, live at `now`; None, without
        asking the index, for a value that cannot be a session id, and None for
        a session unknown, signed out (on any replica) or expired."""
        if not 20 <= len(session_id) <= 100:
            return None
        return await anyio.to_thread.run_sync(self._store.session, token_hash(session_id), now)

    async def sign_out(self, session_id: str) -> None:
        """End the session `session_id` names, on every replica; nothing for none."""
        if session_id:
            await anyio.to_thread.run_sync(self._store.delete_session, token_hash(session_id))
