"""`WorkloadIdentity`: CI jobs authenticated by their platform's ID token
(docs/ci.md), by the `[[workload_identity]]` rules.

Two ways in:
- directly, the ID token as the Bearer token of any request (`principal`):
  verified once (gitreg/workload_identity/verify.py), matched against the
  rules, and the decision (its grants, or the refusal) kept until the token
  expires, so the next requests cost one dictionary lookup;
- exchanged (`exchange`, RFC 8693 at `/oauth/token`): a gitreg token limited
  to the matched grants, expiring with the ID token or after
  `workload_token_ttl`, whichever is first.

Deny by default: a valid token no rule matches is refused with
`NO_RULE`, which says nothing of what would match. Every first use of a
token and every exchange is an audit row naming the issuer, the subject and
the rules matched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio.to_thread

from gitreg.audit.actor import Actor
from gitreg.audit.service import AuditLog
from gitreg.auth.login import OAuthError
from gitreg.auth.ratelimit import FailureLimiter
from gitreg.auth.store import AuthIndex, Identity
from gitreg.auth.tokens import Principal, Scope, new_token, token_hash
from gitreg.errors import BadRequest, Forbidden, Unauthorized
from gitreg.workload_identity.config import TrustedIssuer
from gitreg.workload_identity.issuer import IssuerKeys
from gitreg.workload_identity.rules import grants_of, matching_rules
from gitreg.workload_identity.verify import MAX_TOKEN_BYTES, Verified, looks_like_jwt, verify

NO_RULE = "no workload identity rule matches this token"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105 - a URN
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"  # noqa: S105 - a URN, not a secret
JWT = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105 - a URN
MAX_DECISIONS = 10_000


@dataclass(frozen=True)
class _Decision:
    principal: Principal | None  # None: refused, no rule matched
    expires_at: float


class WorkloadIdentity:
    def __init__(
        self,
        issuers: tuple[TrustedIssuer, ...],
        *,
        store: AuthIndex,
        audit: AuditLog,
        on_change: Callable[[], None],
        token_ttl: float,
        failures: FailureLimiter,
        keys: Mapping[str, IssuerKeys] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._trusted: dict[str, list[TrustedIssuer]] = {}
        for entry in issuers:
            self._trusted.setdefault(entry.issuer, []).append(entry)
        self._keys = dict(keys or {})
        for entry in issuers:
            if entry.issuer not in self._keys:
                self._keys[entry.issuer] = IssuerKeys(entry.issuer, entry.ca_file)
        self._store = store
        self._audit = audit
        self._on_change = on_change
        self._token_ttl = token_ttl
        self._failures = failures  # the access policy's: a subject token is a credential
        self._clock = clock
        self._decisions: dict[str, _Decision] = {}

    @property
    def configured(self) -> bool:
        return bool(self._trusted)

    def accepts(self, token: str) -> bool:
        """Whether `token` is for this service to judge: issuers are configured
        and it has the shape of a JWT, which no gitreg token has."""
        return bool(self._trusted) and looks_like_jwt(token)

    def _match(self, verified: Verified) -> tuple[Principal | None, Actor]:
        claims = verified.claims
        rules = matching_rules(verified.issuer, claims)
        subject = f"{verified.issuer.issuer} {claims.get('sub')}"
        labels = ", ".join(r.label for r in rules)
        actor = Actor("workload", subject, labels)
        if not rules:
            return None, actor
        grants = grants_of(rules)
        principal = Principal(
            token_id=0,
            scope=Scope(max(grants.values())),
            namespaces=frozenset(),
            expires_at=verified.expires_at,
            grants=grants,
            subject=subject,
            rule=labels,
        )
        return principal, actor

    async def principal(self, token: str, client: str) -> Principal:
        """The holder of a workload token sent as a Bearer token. Unauthorized
        for a token that does not verify, Forbidden(NO_RULE) for one no rule
        matches, IssuerUnavailable (503) while its issuer cannot be reached."""
        # Keyed by the token itself, held in memory only until it expires:
        # hashing a JWT on every request would cost more than the lookup.
        now = self._clock()
        known = self._decisions.get(token)
        if known is None or known.expires_at <= now:
            verified = await verify(token, self._trusted, self._keys, now)
            raced = self._decisions.get(token)
            if raced is not None and raced.expires_at > now:
                # A concurrent request with the same token decided meanwhile (no
                # await since this look): its audit row is the one.
                known = raced
            else:
                principal, actor = self._match(verified)
                known = _Decision(principal, verified.expires_at)
                self._remember(token, known, now)
                who = Actor(actor.kind, actor.name, actor.rule, client)
                try:
                    await anyio.to_thread.run_sync(self._audit_first_use, principal, who)
                except BaseException:
                    # Unrecorded, so not decided: the next use is a first use again.
                    self._decisions.pop(token, None)
                    raise
        if known.principal is None:
            raise Forbidden(NO_RULE)
        return known.principal

    def _audit_first_use(self, principal: Principal | None, who: Actor) -> None:
        self._audit.record(
            "sign_in.workload",
            "",
            result="ok" if principal else "refused",
            detail="" if principal else NO_RULE,
            who=who,
        )

    def _remember(self, key: str, decision: _Decision, now: float) -> None:
        if len(self._decisions) >= MAX_DECISIONS:
            for old in [k for k, d in self._decisions.items() if d.expires_at <= now]:
                del self._decisions[old]
            while len(self._decisions) >= MAX_DECISIONS:  # the oldest first
                del self._decisions[next(iter(self._decisions))]
        self._decisions[key] = decision

    async def exchange(self, form: Mapping[str, str], client: str) -> dict[str, object]:
        """RFC 8693 2.1-2.2: a gitreg token for a workload's ID token. OAuthError
        (RFC 6749 5.2, `invalid_request` as RFC 8693 2.2.2 says) for a request
        or a subject token that cannot be accepted; IssuerUnavailable (503)."""
        if not self._trusted:
            raise OAuthError(
                "unsupported_grant_type",
                "token exchange needs [[workload_identity]], which this registry does not have",
            )
        subject_type = form.get("subject_token_type", "")
        if subject_type not in (ID_TOKEN, JWT):
            raise OAuthError("invalid_request", f"subject_token_type must be {ID_TOKEN}")
        if form.get("requested_token_type", ACCESS_TOKEN) != ACCESS_TOKEN:
            raise OAuthError("invalid_request", f"requested_token_type must be {ACCESS_TOKEN}")
        if "actor_token" in form:
            raise OAuthError("invalid_request", "delegation (actor_token) is not supported")
        token = form.get("subject_token", "").strip()
        if len(token) > MAX_TOKEN_BYTES:
            raise OAuthError("invalid_request", f"subject_token is over {MAX_TOKEN_BYTES} bytes")
        requested = _requested_scope(form.get("scope", ""))
        if not looks_like_jwt(token):
            raise OAuthError("invalid_request", "subject_token is not a signed JWT")
        now = self._clock()
        try:
            verified = await verify(token, self._trusted, self._keys, now)
        except Unauthorized as exc:
            self._failures.failed(client)
            raise OAuthError("invalid_request", str(exc)) from exc
        principal, actor = self._match(verified)
        actor = Actor(actor.kind, actor.name, actor.rule, client)
        if principal is None or principal.grants is None:
            await anyio.to_thread.run_sync(
                lambda: self._audit.record(
                    "sign_in.token_exchange", "", result="refused", detail=NO_RULE, who=actor
                )
            )
            raise OAuthError("invalid_request", NO_RULE)
        granted = principal.grants
        if requested is not None:
            if requested > max(granted.values()):
                # RFC 6749 5.2: beyond what the rules grant this token.
                refusal = f"the matched rules do not grant {requested.name}"
                await anyio.to_thread.run_sync(
                    lambda: self._audit.record(
                        "sign_in.token_exchange", "", result="refused", detail=refusal, who=actor
                    )
                )
                raise OAuthError("invalid_scope", refusal)
            granted = {ns: min(scope, requested) for ns, scope in granted.items()}
        expires_at = min(verified.expires_at, now + self._token_ttl)
        if expires_at <= now:
            raise OAuthError("invalid_request", "the workload token has expired")
        secret = new_token()
        grants = {ns: Scope(scope).name for ns, scope in granted.items()}
        who = Identity(actor.name, "", ())

        def store() -> None:
            # The new token is named by its prefix, as `gitreg token list` shows it.
            made = f"token {secret[:12]}"
            with self._audit.recording("sign_in.token_exchange", made, who=actor):
                self._store.add_login_token(
                    token_hash(secret),
                    secret[:12],
                    grants,
                    who,
                    f"workload: {actor.name}"[:200],
                    expires_at,
                )

        await anyio.to_thread.run_sync(store)
        self._on_change()
        answer: dict[str, object] = {
            "access_token": secret,
            "issued_token_type": ACCESS_TOKEN,
            "token_type": "Bearer",
            "expires_in": max(1, int(expires_at - now)),
        }
        if requested is not None:
            answer["scope"] = requested.name
        return answer


def _requested_scope(text: str) -> Scope | None:
    """The `scope` of an exchange (RFC 8693 2.1): gitreg's scope names, space
    separated; the token gets at most the highest one named, never more than
    the rules grant. None when none is asked for."""
    names = text.split()
    if not names:
        return None
    try:
        return max(Scope.parse(name) for name in names)
    except BadRequest as exc:
        raise OAuthError("invalid_scope", str(exc)) from exc
