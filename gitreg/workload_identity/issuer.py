"""One trusted issuer's signing keys: its OpenID discovery document and JWKS
(OpenID Connect Discovery 1.0, RFC 7517), fetched through gitreg's outbound
client (gitreg/upstream/client.py: https only, timeouts, byte caps).

The discovery document must name exactly the configured issuer and an https
`jwks_uri`. Both are kept for `KEYS_TTL`; a token whose `kid` is not in the
set fetches the JWKS again, at most once per `REFRESH_INTERVAL`, so a stream
of tokens with invented kids cannot turn gitreg into a request amplifier
against the issuer. While the keys are fresh, checking a token needs no
network call at all. An issuer that cannot be reached is `IssuerUnavailable`
(503), remembered for `FAILURE_BACKOFF` so that requests meanwhile do not
each wait out the timeouts. An outage is logged here, once as it starts and
once when the issuer answers again, never once per refused request.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitreg.errors import ConfigError, IssuerUnavailable, UpstreamError, UpstreamNotFound
from gitreg.upstream.client import HttpLimits, UpstreamHttp, outbound_ssl_context, require_https

if TYPE_CHECKING:
    from joserfc.jwk import Key, KeySet

log = logging.getLogger("gitreg.workload_identity")

KEYS_TTL = 3600.0
REFRESH_INTERVAL = 60.0
FAILURE_BACKOFF = 30
# The whole fetch, discovery document and JWKS, connecting and reading: a
# request that waits for it gets its answer (the 503 included) well before
# Terraform gives up on the registry (TF_REGISTRY_CLIENT_TIMEOUT, 10 s).
FETCH_BUDGET = 5.0
# Asymmetric algorithms only: `none` proves nothing, and an HMAC "verified"
# with an issuer's public key would let anyone holding it sign.
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LIMITS = HttpLimits(
    connect_timeout=FETCH_BUDGET,
    read_timeout=FETCH_BUDGET,
    total_timeout=FETCH_BUDGET,
    concurrency=4,
    agent="workload identity",
    pooled=False,
)


@dataclass(frozen=True)
class _Keys:
    fetched: float
    algorithms: frozenset[str]
    keys: KeySet
    kids: frozenset[str]


def _algorithms(advertised: object) -> frozenset[str]:
    if not isinstance(advertised, list):
        return frozenset({"RS256"})  # Discovery 3: RS256 is the default
    return frozenset(a for a in advertised if isinstance(a, str)) & ASYMMETRIC


def _imported(raw: dict[str, Any]) -> Key | None:
    """One JWK, or None for one gitreg cannot read (a key type or curve it does
    not know, a missing parameter): the issuer's other keys stay usable."""
    from joserfc.errors import JoseError
    from joserfc.jwk import JWKRegistry

    try:
        return JWKRegistry.import_key(raw)
    except (JoseError, ValueError, TypeError, LookupError):
        return None


class IssuerKeys:
    """The keys of one issuer; safe to share between requests."""

    def __init__(
        self,
        issuer: str,
        ca_file: str = "",
        http: UpstreamHttp | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        if http is None:
            try:
                context = (
                    ssl.create_default_context(cafile=ca_file)
                    if ca_file
                    else outbound_ssl_context()
                )
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"workload_identity issuer {issuer}: ca_file: {exc}") from exc
            http = UpstreamHttp(LIMITS, ssl_context=context)
        self._http = http
        self._clock = clock
        self._keys: _Keys | None = None
        self._failed_at: float | None = None
        self._failure = ""
        self._lock = asyncio.Lock()
        self.fetches = 0  # JWKS fetches, for tests and the benchmark

    async def keys_for(self, kid: str | None) -> tuple[frozenset[str], KeySet, bool]:
        """(accepted algorithms, key set, whether `kid` is in it). Fetches only when
        the keys are older than KEYS_TTL, or `kid` is unknown and the last fetch
        is older than REFRESH_INTERVAL."""
        current = self._keys
        if current is not None and self._fresh(current, kid):
            return current.algorithms, current.keys, kid in current.kids
        async with self._lock:
            current = self._keys
            if current is None or not self._fresh(current, kid):
                current = await self._refresh(current)
            return current.algorithms, current.keys, kid in current.kids

    def _fresh(self, keys: _Keys, kid: str | None) -> bool:
        age = self._clock() - keys.fetched
        if age >= KEYS_TTL:
            return False
        return kid in keys.kids or age < REFRESH_INTERVAL

    async def _refresh(self, previous: _Keys | None) -> _Keys:
        failed = self._failed_at
        if failed is not None and self._clock() - failed < FAILURE_BACKOFF:
            if previous is not None and self._clock() - previous.fetched < KEYS_TTL:
                return previous
            raise IssuerUnavailable(self._failure, FAILURE_BACKOFF)
        try:
            async with asyncio.timeout(FETCH_BUDGET):
                fetched = await self._fetch()
        except (
            UpstreamError,
            UpstreamNotFound,
            TimeoutError,
            ValueError,
            TypeError,
            KeyError,
        ) as exc:
            if isinstance(exc, TimeoutError):
                reason = f"it did not answer within {FETCH_BUDGET:g}s"
            else:
                reason = str(exc)
            if failed is None:  # one line per outage, not one per refused request
                log.warning(
                    "workload identity issuer %s cannot be used: %s; tokens it signed"
                    " are refused with 503 until it answers",
                    self.issuer,
                    reason,
                )
            self._failed_at = self._clock()
            self._failure = f"workload identity issuer {self.issuer} cannot be used: {reason}"
            self._failure = self._failure[:400]
            if previous is not None and self._clock() - previous.fetched < KEYS_TTL:
                return previous  # an unknown kid stays unknown; known keys keep working
            raise IssuerUnavailable(self._failure, FAILURE_BACKOFF) from exc
        if failed is not None:
            log.info("workload identity issuer %s answers again", self.issuer)
        self._failed_at = None
        self._keys = fetched
        return fetched

    async def _fetch(self) -> _Keys:
        from joserfc.jwk import KeySet

        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document, _ = await self._http.json(url, "the discovery document")
        if document.get("issuer") != self.issuer:
            raise UpstreamError(f"its discovery document names issuer {document.get('issuer')!r}")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise UpstreamError("its discovery document has no jwks_uri")
        require_https(jwks_uri)
        jwks, _ = await self._http.json(jwks_uri, "the JWKS")
        self.fetches += 1
        listed = jwks.get("keys")
        if not isinstance(listed, list):
            raise UpstreamError("its JWKS has no keys")
        signing = [
            k
            for k in listed
            if isinstance(k, dict) and k.get("use", "sig") == "sig" and k.get("kty") != "oct"
        ]
        keys = KeySet([k for k in map(_imported, signing) if k is not None])
        if not keys.keys:
            raise UpstreamError("its JWKS has no signing key gitreg can read")
        kids = frozenset(k.kid for k in keys if k.kid)
        algorithms = _algorithms(document.get("id_token_signing_alg_values_supported"))
        return _Keys(self._clock(), algorithms, keys, kids)
