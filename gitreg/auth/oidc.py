"""The OpenID Connect relying party (docs/sign-in.md).

gitreg signs people in with the authorization code flow against the
configured issuer (OpenID Connect Core 1.0, 3.1), with PKCE S256 (RFC 7636),
`state` and `nonce`. The id_token is checked as Core 3.1.3.7 says: `iss` is the
configured issuer, `aud` holds our client id (and `azp` is ours when there are
several audiences), `exp` has not passed (60 s of leeway for clock skew), the
`nonce` is the one we sent, and the signature verifies with a key from the
issuer's JWKS under an algorithm the issuer advertises. `none` and the HS*
family are never accepted: an HMAC "verified" with a public key proves
nothing. JOSE is joserfc's, imported on first use so that processes without
OIDC never load it.

The JWKS is cached; a token signed with a `kid` we do not know (the issuer
rotated its keys) fetches the set again, at most once per
`JWKS_REFRESH_INTERVAL`, so a stream of forged kids cannot turn gitreg into a
request amplifier against the issuer.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import anyio.to_thread

from gitreg.auth.store import Identity
from gitreg.errors import Forbidden, UpstreamError
from gitreg.secret_refs import resolve_secret
from gitreg.settings import Settings

if TYPE_CHECKING:
    # httpx is imported where the identity provider is called: a serving worker
    # that never signs anyone in does not load it (tests/server/test_serve_imports.py).
    import httpx
    from joserfc.jwk import KeySet

log = logging.getLogger("gitreg.auth.oidc")

MAX_DOCUMENT_BYTES = 1024 * 1024
DISCOVERY_TTL = 3600.0
# A failed discovery is remembered this long (the Retry-After of the 503 pages),
# so visitors of an unreachable issuer do not each wait out TIMEOUT_SECONDS.
DISCOVERY_RETRY = 30.0
JWKS_REFRESH_INTERVAL = 60.0
LEEWAY = 60
TIMEOUT_SECONDS = 10.0


class IdTokenInvalid(Forbidden):
    """The issuer's answer cannot be trusted; the sign-in is refused."""


@dataclass(frozen=True)
class ProviderMetadata:
    """The parts of the issuer's discovery document gitreg uses (Discovery 3)."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    algorithms: tuple[str, ...]  # id_token signing algorithms, none and HS* removed
    auth_methods: tuple[str, ...]


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 4.2, S256: BASE64URL(SHA256(ASCII(verifier))) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _usable_algorithms(advertised: object) -> tuple[str, ...]:
    if not isinstance(advertised, list):
        return ("RS256",)  # Discovery 3: RS256 MUST be supported; the default
    return tuple(
        a for a in advertised if isinstance(a, str) and a != "none" and not a.startswith("HS")
    )


def groups_from(claims: dict[str, Any], claim: str) -> tuple[str, ...]:
    """The groups claim when it is a list of strings; anything else is no groups,
    never a guess (a string would otherwise match as its characters)."""
    value = claims.get(claim)
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        return ()
    return tuple(value)


class OidcClient:
    """One issuer, as configured; safe to share between requests."""

    def __init__(self, settings: Settings) -> None:
        self.issuer = settings.oidc_issuer
        self.client_id = settings.oidc_client_id
        self._secret_ref = settings.oidc_client_secret
        self.scopes = " ".join(settings.oidc_scopes.replace(",", " ").split())
        self.groups_claim = settings.oidc_groups_claim
        self._metadata: tuple[float, ProviderMetadata] | None = None
        self._failed: tuple[float, UpstreamError] | None = None
        self._keys: KeySet | None = None
        self._keys_fetched = 0.0
        self._lock = asyncio.Lock()
        self._discovery_lock = asyncio.Lock()

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        import httpx

        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
            try:
                async with client.stream("GET", url) as answer:
                    body = await _read_capped(answer, what)
            except httpx.HTTPError as exc:
                raise UpstreamError(f"identity provider: cannot fetch {what}: {exc}") from exc
        return _json_object(body, what)

    def _known_metadata(self) -> ProviderMetadata | None:
        cached = self._metadata
        if cached is not None and time.monotonic() - cached[0] < DISCOVERY_TTL:
            return cached[1]
        failed = self._failed
        if failed is not None and time.monotonic() - failed[0] < DISCOVERY_RETRY:
            raise UpstreamError(str(failed[1]))
        return None

    async def metadata(self) -> ProviderMetadata:
        known = self._known_metadata()
        if known is not None:
            return known
        # One fetch at a time: the sign-in pages a crowd opens at once after a
        # restart wait for the first request's discovery instead of each
        # sending the issuer their own.
        async with self._discovery_lock:
            known = self._known_metadata()
            return known if known is not None else await self._fetch_metadata()

    async def _fetch_metadata(self) -> ProviderMetadata:
        try:
            metadata = await self._discover()
        except UpstreamError as exc:
            self._failed = (time.monotonic(), exc)
            raise
        self._failed = None
        self._metadata = (time.monotonic(), metadata)
        return metadata

    async def _discover(self) -> ProviderMetadata:
        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = await self._get_json(url, "the discovery document")
        # Discovery 4.3: the document must name exactly the issuer asked for.
        if document.get("issuer") != self.issuer:
            raise UpstreamError(
                f"identity provider: discovery names issuer {document.get('issuer')!r},"
                f" not {self.issuer!r}"
            )
        fields = ("authorization_endpoint", "token_endpoint", "jwks_uri")
        if not all(isinstance(document.get(f), str) for f in fields):
            raise UpstreamError("identity provider: discovery lacks an endpoint gitreg needs")
        methods = document.get("token_endpoint_auth_methods_supported")
        return ProviderMetadata(
            self.issuer,
            authorization_endpoint=str(document["authorization_endpoint"]),
            token_endpoint=str(document["token_endpoint"]),
            jwks_uri=str(document["jwks_uri"]),
            algorithms=_usable_algorithms(document.get("id_token_signing_alg_values_supported")),
            auth_methods=tuple(methods) if isinstance(methods, list) else ("client_secret_basic",),
        )

    async def authorization_url(
        self, redirect_uri: str, state: str, nonce: str, verifier: str
    ) -> str:
        metadata = await self.metadata()
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": self.scopes,
                "state": state,
                "nonce": nonce,
                "code_challenge": pkce_challenge(verifier),
                "code_challenge_method": "S256",
            }
        )
        separator = "&" if "?" in metadata.authorization_endpoint else "?"
        return f"{metadata.authorization_endpoint}{separator}{query}"

    async def exchange(self, code: str, redirect_uri: str, verifier: str) -> str:
        """The id_token for an authorization code (Core 3.1.3.1-3.1.3.3)."""
        metadata = await self.metadata()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        import httpx

        auth: httpx.BasicAuth | None = None
        # `file:` references are read at each use (rotation without restart): a
        # file read, so not on the event loop.
        ref = self._secret_ref
        secret = await anyio.to_thread.run_sync(resolve_secret, ref) if ref else ""
        if not secret:
            form["client_id"] = self.client_id  # a public client: PKCE is its proof
        elif "client_secret_basic" in metadata.auth_methods:
            # RFC 6749 2.3.1: both parts form-urlencoded before Basic encoding.
            auth = httpx.BasicAuth(quote(self.client_id, safe=""), quote(secret, safe=""))
        else:
            form.update(client_id=self.client_id, client_secret=secret)
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
            try:
                async with client.stream(
                    "POST",
                    metadata.token_endpoint,
                    data=form,
                    auth=auth or httpx.USE_CLIENT_DEFAULT,
                ) as answer:
                    # Read through the same 1 MiB cap as every other answer of the
                    # identity provider, also when it refuses.
                    status, body = answer.status_code, await _read_body(answer, "the token answer")
            except httpx.HTTPError as exc:
                raise UpstreamError(f"identity provider: token request failed: {exc}") from exc
        if status != 200:
            log.warning("token endpoint answered %s: %.200r", status, body[:200])
            raise IdTokenInvalid("the identity provider refused the sign-in code")
        id_token = _json_object(body, "the token answer").get("id_token")
        if not isinstance(id_token, str):
            raise IdTokenInvalid("the identity provider's answer has no id_token")
        return id_token

    async def identify(self, code: str, redirect_uri: str, verifier: str, nonce: str) -> Identity:
        """The person a sign-in code names: `exchange`, then `validate`."""
        return await self.validate(await self.exchange(code, redirect_uri, verifier), nonce)

    async def _key_set(self, kid: str | None) -> KeySet:
        """The issuer's keys; fetched again for a kid not among them, rate-limited."""
        from joserfc.jwk import KeySet

        async with self._lock:
            known = self._keys is not None and any(k.kid == kid for k in self._keys)
            stale = time.monotonic() - self._keys_fetched >= JWKS_REFRESH_INTERVAL
            if self._keys is None or (not known and stale):
                metadata = await self.metadata()
                document = await self._get_json(metadata.jwks_uri, "the JWKS")
                keys = document.get("keys")
                if not isinstance(keys, list):
                    raise UpstreamError("identity provider: the JWKS has no keys")
                signing = [k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig"]
                try:
                    self._keys = KeySet.import_key_set({"keys": signing})
                except (ValueError, TypeError, KeyError) as exc:
                    raise UpstreamError(f"identity provider: unusable JWKS: {exc}") from exc
                self._keys_fetched = time.monotonic()
            return self._keys

    async def validate(self, id_token: str, nonce: str, now: float | None = None) -> Identity:
        """The person an id_token names, after every check of Core 3.1.3.7."""
        from joserfc import jws, jwt
        from joserfc.errors import JoseError

        metadata = await self.metadata()
        try:
            header = jws.extract_compact(id_token.encode()).headers()
        except (JoseError, ValueError) as exc:
            raise IdTokenInvalid("the id_token is not a signed JWT") from exc
        alg = header.get("alg")
        if alg not in metadata.algorithms:
            raise IdTokenInvalid(f"the id_token's algorithm {str(alg)[:20]!r} is not accepted")
        kid = header.get("kid")
        keys = await self._key_set(kid if isinstance(kid, str) else None)
        try:
            token = jwt.decode(id_token, keys, algorithms=[alg])
            registry = jwt.JWTClaimsRegistry(
                now=int(now if now is not None else time.time()),
                leeway=LEEWAY,
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": self.client_id},
                exp={"essential": True},
                sub={"essential": True},
                nonce={"essential": True, "value": nonce},
            )
            registry.validate(token.claims)
        except JoseError as exc:
            raise IdTokenInvalid(f"the id_token is not valid: {exc.error}") from exc
        except ValueError as exc:
            raise IdTokenInvalid("the id_token is not valid") from exc
        claims = token.claims
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise IdTokenInvalid("the id_token has several audiences and azp is not gitreg")
        email = claims.get("email")
        return Identity(
            subject=str(claims["sub"]),
            email=email if isinstance(email, str) else "",
            groups=groups_from(claims, self.groups_claim),
        )


def new_secret() -> str:
    """A random state, nonce or PKCE verifier (43 characters, RFC 7636 4.1)."""
    return secrets.token_urlsafe(32)


async def _read_capped(answer: httpx.Response, what: str) -> bytes:
    if answer.status_code != 200:
        raise UpstreamError(f"identity provider: {what} answered {answer.status_code}")
    return await _read_body(answer, what)


async def _read_body(answer: httpx.Response, what: str) -> bytes:
    body = bytearray()
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > MAX_DOCUMENT_BYTES:
            raise UpstreamError(f"identity provider: {what} is larger than 1 MiB")
    return bytes(body)


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise UpstreamError(f"identity provider: {what} is not JSON") from exc
    if not isinstance(value, dict):
        raise UpstreamError(f"identity provider: {what} is not a JSON object")
    return value
