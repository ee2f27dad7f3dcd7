"""Checking a workload's ID token (RFC 7519, OpenID Connect Core 2): the
signature with a key of its issuer's JWKS under an asymmetric algorithm the
issuer advertises, then `iss` (a configured issuer, exactly), `aud` (holds
the configured audience), `exp`, `nbf` and `iat`, each with `LEEWAY`
seconds for clock skew. JOSE is joserfc's, imported on first use.

Every refusal is `Unauthorized` with a reason that names the failed check and
nothing of what would pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitreg.errors import Unauthorized
from gitreg.workload_identity.config import TrustedIssuer
from gitreg.workload_identity.issuer import ASYMMETRIC, IssuerKeys

LEEWAY = 30
MAX_TOKEN_BYTES = 16 * 1024


@dataclass(frozen=True)
class Verified:
    issuer: TrustedIssuer
    claims: dict[str, Any]
    expires_at: float


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts (surrounding blanks aside): what no gitreg token looks like."""
    token = token.strip()  # the same string, without a copy, when nothing is stripped
    return token.startswith("eyJ") and len(token) <= MAX_TOKEN_BYTES and token.count(".") == 2


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from joserfc import jws
    from joserfc.errors import JoseError

    try:
        compact = jws.extract_compact(token.encode())
        payload = json.loads(compact.payload)
    except (JoseError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the parser goes, sent on purpose.
        raise Unauthorized("the workload token is not a signed JWT") from exc
    if not isinstance(payload, dict):
        raise Unauthorized("the workload token is not a signed JWT")
    return dict(compact.headers()), payload


async def verify(
    token: str,
    trusted: Mapping[str, Sequence[TrustedIssuer]],
    keys: Mapping[str, IssuerKeys],
    now: float,
) -> Verified:
    from joserfc import jwt
    from joserfc.errors import JoseError

    header, payload = _unverified(token)
    iss = payload.get("iss")
    entries = trusted.get(iss) if isinstance(iss, str) else None
    if not entries:
        raise Unauthorized("the workload token's issuer is not trusted by this registry")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ASYMMETRIC:
        raise Unauthorized(f"the workload token's algorithm {str(alg)[:20]!r} is not accepted")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise Unauthorized("the workload token names no signing key (kid)")
    assert isinstance(iss, str)
    algorithms, key_set, known = await keys[iss].keys_for(kid)
    if alg not in algorithms:
        raise Unauthorized(f"the workload token's algorithm {alg!r} is not accepted")
    if not known:
        raise Unauthorized("the workload token is signed by a key its issuer does not publish")
    try:
        decoded = jwt.decode(token, key_set, algorithms=[alg])
        jwt.JWTClaimsRegistry(
            now=int(now),
            leeway=LEEWAY,
            iss={"essential": True, "value": iss},
            exp={"essential": True},
            iat={"essential": True},
            sub={"essential": True},
        ).validate(decoded.claims)
    except JoseError as exc:
        raise Unauthorized(f"the workload token is not valid: {exc.error}") from exc
    except ValueError as exc:
        raise Unauthorized("the workload token is not valid") from exc
    claims = decoded.claims
    iat = claims.get("iat")
    if not isinstance(iat, int | float) or iat > now + LEEWAY:
        raise Unauthorized("the workload token is not valid: issued in the future")
    aud = claims.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    for entry in entries:
        if entry.audience in audiences:
            return Verified(entry, claims, float(claims["exp"]))
    raise Unauthorized("the workload token's audience is not this registry's")
