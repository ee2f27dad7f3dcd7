"""`terraform login`: gitreg as the OAuth 2.0 server of HashiCorp's login
protocol (login.v1, https://developer.hashicorp.com/terraform/internals/login-protocol),
signing the person in at the OpenID Connect issuer (gitreg.auth.oidc).

1. Terraform opens `/oauth/authorization` in the browser with its client id,
   `response_type=code`, a loopback `redirect_uri`, `state` and a PKCE S256
   challenge. `begin` checks them and sends the browser to the issuer with a
   state, nonce and PKCE verifier of gitreg's own, kept as a pending sign-in.
2. The issuer sends the browser back to `/oauth/callback`. `finish` takes the
   pending sign-in (once), exchanges the code, validates the id_token, turns
   the person's groups into scopes (gitreg.auth.grants) and sends the browser
   to Terraform's loopback listener with a one-time code valid `CODE_TTL` s.
3. Terraform posts the code, its redirect_uri and PKCE verifier to
   `/oauth/token` and gets an ordinary gitreg API token (hashed at rest,
   expiring after `login_token_ttl`, revocable with `gitreg token revoke`).

Both in-flight steps live in the index (`AuthIndex.put/take_login_state`), so
any replica can serve any step, and taking one deletes it: codes are single-use
(RFC 6749 4.1.2) even when two replicas race. A code is a credential: refused
ones count as failed authentications, limited per client like bad tokens.
Without `oidc_issuer` every step is NotFound.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread

from gitreg.auth.grants import effective
from gitreg.auth.oidc import IdTokenInvalid, OidcClient, new_secret, pkce_challenge
from gitreg.auth.pending import PENDING_TTL, SignInLimits, put_step, step_key, take_step
from gitreg.auth.ratelimit import FailureLimiter
from gitreg.auth.store import AuthIndex, Identity
from gitreg.auth.tokens import new_token, token_hash
from gitreg.errors import BadRequest, NotFound, UpstreamError
from gitreg.settings import Settings

log = logging.getLogger("gitreg.auth.login")

CLIENT_ID = "terraform-cli"
PORTS = (10000, 10010)
CODE_TTL = 60.0
# Exactly what Terraform sends (login protocol, "Client"): a loopback host
# named as such, a port in the advertised range, the path /login, and nothing
# else: no userinfo, query, fragment, percent-encoding, or trailing dot.
_REDIRECT_RE = re.compile(r"http://(?:localhost|127\.0\.0\.1):(\d{5})/login")
# RFC 7636 4.1: 43-128 characters of [A-Za-z0-9-._~].
_VERIFIER_RE = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_CHALLENGE_RE = re.compile(r"[A-Za-z0-9_-]{43}")


class OAuthError(BadRequest):
    """An RFC 6749 error (5.2 at the token endpoint; an error page at the
    authorization endpoint when the redirect_uri cannot be trusted)."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description


@dataclass(frozen=True)
class Redirect:
    """Where the browser goes next."""

    url: str


@dataclass(frozen=True)
class Refusal:
    """No token for this person. Shown to them in the browser rather than sent
    to Terraform's listener as RFC 6749 4.1.2.1 would: Terraform (1.0 to 1.11)
    answers a callback without `code` with a bare 400 and keeps waiting, so
    the person would see an empty page and never the reason. The page links
    the RFC error redirect (`back_url`) for clients that do read it."""

    error: str
    description: str
    back_url: str


def check_redirect_uri(uri: str) -> str:
    match = _REDIRECT_RE.fullmatch(uri)
    if match is None or not PORTS[0] <= int(match.group(1)) <= PORTS[1]:
        raise OAuthError(
            "invalid_request",
            "redirect_uri must be http://localhost:PORT/login or http://127.0.0.1:PORT/login"
            f" with PORT in {PORTS[0]}-{PORTS[1]}",
        )
    return uri


def _with_query(uri: str, params: Mapping[str, str]) -> str:
    # The redirect_uri has no query (check_redirect_uri), so "?" starts it.
    return f"{uri}?{urlencode({k: v for k, v in params.items() if v})}"


class LoginFlow:
    def __init__(
        self,
        settings: Settings,
        store: AuthIndex,
        oidc: OidcClient,
        on_change: Callable[[], None],
        limits: SignInLimits,
        clock: Callable[[], float] = time.time,
        *,
        failures: FailureLimiter,
    ) -> None:
        self._settings = settings
        self._limits = limits
        self._failures = failures  # the access policy's: a code is a credential
        self._store = store
        self._oidc = oidc
        self._grants = settings.grants
        self._clock = clock
        # A token added in this process is not a commit by another one, which
        # is all the access snapshot's watcher sees: say so, or the new token
        # would be refused until some other write (gitreg.auth.service).
        self._on_change = on_change

    def _configured(self) -> None:
        if not self._settings.oidc_issuer:
            raise NotFound("sign-in is not configured on this registry (oidc_issuer)")

    async def _put(self, key: str, payload: dict[str, Any], ttl: float) -> None:
        await put_step(self._store, key, payload, ttl, self._clock())

    async def _take(self, key: str) -> dict[str, Any] | None:
        return await take_step(self._store, key, self._clock())

    async def begin(self, params: Mapping[str, str], callback_url: str, client: str) -> Redirect:
        """Step 1 for a browser at address `client`. Raises OAuthError (shown,
        never redirected) while the client or redirect_uri is not trusted, and
        SignInsBusy over the limits; later errors go back to Terraform."""
        self._configured()
        if params.get("client_id") != CLIENT_ID:
            raise OAuthError("invalid_client", f"client_id must be {CLIENT_ID}")
        redirect_uri = check_redirect_uri(params.get("redirect_uri", ""))
        state = params.get("state", "")

        def back(error: str, description: str) -> Redirect:
            # RFC 6749 4.1.2.1: a trusted redirect_uri hears about the error.
            fields = {"error": error, "error_description": description, "state": state}
            return Redirect(_with_query(redirect_uri, fields))

        if params.get("response_type") != "code":
            return back("unsupported_response_type", "response_type must be code")
        if params.get("code_challenge_method") != "S256":
            return back("invalid_request", "PKCE with code_challenge_method=S256 is required")
        challenge = params.get("code_challenge", "")
        if not _CHALLENGE_RE.fullmatch(challenge):
            return back("invalid_request", "code_challenge must be a base64url SHA-256")
        if not state:
            return back("invalid_request", "state is required")
        idp_state, nonce, verifier = new_secret(), new_secret(), new_secret()
        pending = {
            "redirect_uri": redirect_uri,
            "challenge": challenge,
            "state": state,
            "nonce": nonce,
            "verifier": verifier,
            "callback": callback_url,
        }
        url = await self._oidc.authorization_url(callback_url, idp_state, nonce, verifier)
        # Counted only now, just before the write: a request refused above (a bad
        # parameter, the issuer unreachable) writes nothing and uses no allowance.
        await self._limits.admit(client, self._clock())
        await self._put(step_key("login", idp_state), pending, PENDING_TTL)
        return Redirect(url)

    async def finish(self, params: Mapping[str, str]) -> Redirect | Refusal:
        """Step 2, the issuer's answer. OAuthError when there is no pending
        sign-in to answer (unknown, used or expired state); a Refusal when the
        person may not have a token."""
        self._configured()
        pending = await self._take(step_key("login", params.get("state", "")))
        if pending is None:
            raise OAuthError(
                "invalid_request", "this sign-in is unknown, expired or already finished"
            )

        def refuse(error: str, description: str) -> Refusal:
            fields = {"error": error, "error_description": description, "state": pending["state"]}
            return Refusal(error, description, _with_query(pending["redirect_uri"], fields))

        if "error" in params or "code" not in params:
            # The issuer refused (the person cancelled, or is not assigned to the app).
            return refuse("access_denied", "the identity provider did not sign you in")
        try:
            who = await self._oidc.identify(
                params["code"], pending["callback"], pending["verifier"], pending["nonce"]
            )
        except IdTokenInvalid as exc:
            log.warning("sign-in refused: %s", exc)  # names the check, never the token
            return refuse("access_denied", str(exc))
        except UpstreamError as exc:
            log.warning("sign-in failed: %s", exc)
            return refuse("temporarily_unavailable", "the identity provider cannot be reached")
        grants = effective(self._grants, who.groups)
        if not grants:
            groups = ", ".join(who.groups) or "none"
            return refuse(
                "access_denied",
                f"{who.email or who.subject} has no access to this registry: no [[grants]]"
                f" entry names any of your groups ({groups}); ask its operator",
            )
        code = new_secret()
        granted = {
            "redirect_uri": pending["redirect_uri"],
            "challenge": pending["challenge"],
            "grants": {ns: scope.name for ns, scope in grants.items()},
            "subject": who.subject,
            "email": who.email,
            "groups": list(who.groups),
        }
        await self._put(step_key("code", code), granted, CODE_TTL)
        fields = {"code": code, "state": pending["state"]}
        return Redirect(_with_query(pending["redirect_uri"], fields))

    def check_client(self, client: str) -> None:
        """Before a token request of `client` is read: TooManyRequests while it
        is over its failed-authentication limit."""
        self._configured()
        self._failures.check(client)

    async def token(self, form: Mapping[str, str], client: str) -> dict[str, object]:
        """Step 3 (RFC 6749 4.1.3, RFC 7636 4.6), for a request from `client`.
        The code is spent by any attempt, right or wrong, so a stolen code
        cannot be retried; a refused code counts against `client`."""
        self._configured()
        try:
            return await self._token(form)
        except OAuthError as exc:
            if exc.error == "invalid_grant":
                self._failures.failed(client)
            raise

    async def _token(self, form: Mapping[str, str]) -> dict[str, object]:
        if form.get("grant_type") != "authorization_code":
            raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code")
        if form.get("client_id") != CLIENT_ID:
            raise OAuthError("invalid_client", f"client_id must be {CLIENT_ID}")
        granted = await self._take(step_key("code", form.get("code", "")))
        if granted is None:
            raise OAuthError("invalid_grant", "the code is unknown, expired or already used")
        if form.get("redirect_uri") != granted["redirect_uri"]:
            raise OAuthError("invalid_grant", "redirect_uri differs from the one authorized")
        verifier = form.get("code_verifier", "")
        if not _VERIFIER_RE.fullmatch(verifier) or not hmac.compare_digest(
            pkce_challenge(verifier), granted["challenge"]
        ):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        token = new_token()
        who = Identity(granted["subject"], granted["email"], tuple(granted["groups"]))
        lifetime = self._settings.login_token_ttl
        await anyio.to_thread.run_sync(
            self._store.add_login_token,
            token_hash(token),
            token[:12],
            dict(granted["grants"]),
            who,
            f"terraform login: {who.email or who.subject}",
            self._clock() + lifetime,
        )
        self._on_change()
        return {"access_token": token, "token_type": "bearer", "expires_in": int(lifetime)}
