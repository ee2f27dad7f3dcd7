"""Pull tokens of the `/v2/token` endpoint (the Docker registry token flow).

A client refused with `401` and a `Bearer realm=...,scope="repository:NAME:pull"`
challenge asks the realm for a token, with Basic credentials (any user name, a
gitreg token as the password: what `docker login`-style credential files
hold) or a gitreg Bearer token. What it gets back names the repositories it may
pull, and nothing else, until it expires: `oci1.<payload>.<expires>.<mac>`,
where the payload lists the repositories and the token's id, and the MAC is
the URL signer's, so every replica checks it and a key rotation applies to it
as to signed download URLs.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gitreg.auth.signed_urls import UrlSigner
from gitreg.errors import BadRequest, Forbidden, Unauthorized
from gitreg.oci.names import MAX_NAME, NameInvalid

PREFIX = "oci1."
# The path the MAC is computed over: no route serves it.
_SIGNED_PATH = "/v2/token/grant/"
MAX_SCOPES = 32


class InsufficientScope(Unauthorized):
    """A pull token that does not name the repository asked for: a 401 whose
    challenge carries `error="insufficient_scope"` (RFC 6750 section 3) and
    this repository's scope, as Docker's registry answers it. RFC 6750 would
    allow a 403, but registry clients ask the realm again only on a 401."""


# The Docker token flow's scope grammar, matched whole:
# `TYPE:NAME:ACTION[,ACTION]*`, where TYPE may carry a class
# (`repository(plugin)`), NAME may start with a hostname and port
# (`_resource_name`), and `*` is the action clients ask `registry:catalog` for.
_TYPE_RE = re.compile(r"[a-z0-9]+(?:\([a-z0-9]+\))?")
_ACTIONS_RE = re.compile(r"[a-z*]*(?:,[a-z*]*)*")
_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST_RE = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}(?::[0-9]+)?")
_PATH_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")


@dataclass(frozen=True)
class Grant:
    repositories: frozenset[str]
    # Asked for by a client whose credentials may not read them: answered as
    # a token for another namespace is (404), not with another challenge.
    denied: frozenset[str]
    token_id: int  # 0 for an anonymous grant
    expires: int


@dataclass(frozen=True)
class ScopeRequest:
    """One scope a client asks the token endpoint for."""

    type: str
    name: str
    actions: frozenset[str]


def parse_scopes(scopes: list[str]) -> list[ScopeRequest]:
    """The scopes of a token request, each `TYPE:NAME:ACTIONS`. BadRequest for
    one outside the grammar (NameInvalid when only its name is), or for more
    than MAX_SCOPES: a client asking for something no token can say is told
    so, rather than handed a token that opens nothing."""
    if len(scopes) > MAX_SCOPES:
        raise BadRequest(f"at most {MAX_SCOPES} scopes per token request, not {len(scopes)}")
    parsed: list[ScopeRequest] = []
    for scope in scopes:
        shown = scope[:300]
        kind, _, rest = scope.partition(":")
        name, colon, actions = rest.rpartition(":")
        if not colon or not _TYPE_RE.fullmatch(kind) or not _ACTIONS_RE.fullmatch(actions):
            raise BadRequest(
                f"malformed scope {shown!r}: expected repository:NAME:pull (docs/oci.md)"
            )
        if len(name) > MAX_NAME or not _resource_name(name):
            raise NameInvalid(f"invalid repository name in scope {shown!r}")
        parsed.append(ScopeRequest(kind, name, frozenset(actions.split(","))))
    return parsed


def _resource_name(name: str) -> bool:
    """`[HOST/]PATH`; as in Docker's references, the first part names a host
    only when it has a `.` or a `:` or is `localhost`."""
    host, slash, path = name.partition("/")
    if slash and ("." in host or ":" in host or host == "localhost"):
        return bool(_HOST_RE.fullmatch(host) and _PATH_RE.fullmatch(path))
    return bool(_PATH_RE.fullmatch(name))


def issue(
    signer: UrlSigner, repositories: list[str], denied: list[str], token_id: int
) -> tuple[str, int]:
    """A token for `repositories` and its lifetime in seconds."""
    document = json.dumps(
        {"r": sorted(set(repositories)), "d": sorted(set(denied)), "t": token_id},
        separators=(",", ":"),
    )
    payload = base64.urlsafe_b64encode(document.encode()).decode().rstrip("=")
    query = dict(part.split("=", 1) for part in signer.sign(_SIGNED_PATH + payload).split("&"))
    return f"{PREFIX}{payload}.{query['expires']}.{query['signature']}", int(signer.ttl)


def read(signer: UrlSigner, token: str) -> Grant:
    """The grant a token carries; Forbidden when it is malformed, forged or
    expired (the caller answers that as a bad credential)."""
    body = token[len(PREFIX) :] if token.startswith(PREFIX) else ""
    payload, _, rest = body.partition(".")
    expires, _, signature = rest.partition(".")
    query: Mapping[str, str] = {"expires": expires, "signature": signature}
    signer.verify(_SIGNED_PATH + payload, query)
    try:
        document = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        repositories = frozenset(str(r) for r in document["r"])
        denied = frozenset(str(r) for r in document["d"])
        token_id = int(document["t"])
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise Forbidden("malformed registry token") from exc
    return Grant(repositories, denied, token_id, int(expires))


def is_grant(token: str) -> bool:
    return token.startswith(PREFIX)
