"""Workload ID tokens used directly as Bearer tokens (gitreg/workload_identity/service.py),
checked by the access policy in process against local issuers over TLS that
issue tokens shaped exactly like GitHub Actions', GitLab CI's and Kubernetes'."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitreg.audit.store import AuditQuery
from gitreg.auth.service import Credentials
from gitreg.auth.tokens import Principal, Scope
from gitreg.errors import DatabaseUnavailable, Forbidden, IssuerUnavailable, Unauthorized
from gitreg.services import Services
from gitreg.workload_identity import issuer as issuer_module
from gitreg.workload_identity.service import NO_RULE
from tests.support.provider_dist import make_services
from tests.support.server import free_port
from tests.support.workload_issuer import Issuer, WorkloadIssuers, b64, new_key
from tests.workload_identity.conftest import AUDIENCE, workload_config, write_config


@pytest.fixture
def svc(tmp_path: Path, issuers: WorkloadIssuers) -> Iterator[Services]:
    data_dir = tmp_path / "data"
    write_config(data_dir, workload_config(issuers))
    services = make_services(data_dir)
    yield services
    services.close()


def _principal(svc: Services, token: str, client: str = "203.0.113.7") -> Principal:
    found = asyncio.run(svc.access.principal(Credentials(f"Bearer {token}", client)))
    assert found is not None
    return found


def test_an_allowed_repository_reads_its_namespace_and_no_more(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    found = _principal(svc, issuers["github"].sign(AUDIENCE, repository="acme/infra-live"))
    assert found.allows(Scope.read, "acme")
    assert not found.allows(Scope.publish, "acme")
    assert not found.allows(Scope.read, "other")
    assert found.rule == "workload_identity[1].rules[1]"
    assert found.subject.endswith("repo:acme/infra-live:ref:refs/heads/main")


def test_a_token_no_rule_matches_is_refused_with_the_rule_free_reason(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    token = issuers["github"].sign(AUDIENCE, repository="acme/infra-dead")
    with pytest.raises(Forbidden) as refused:
        _principal(svc, token)
    assert str(refused.value) == NO_RULE
    assert refused.value.status == 403


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"aud": "https://other.example.com"}, "audience"),
        ({"now": time.time() - 900}, "expired"),
        ({"nbf": int(time.time()) + 600}, "not valid"),
        ({"iat": int(time.time()) + 600}, "not valid"),
        ({"iss": "https://token.actions.githubusercontent.com"}, "issuer is not trusted"),
    ],
    ids=["audience", "expired", "nbf", "iat", "issuer"],
)
def test_audience_lifetime_and_issuer_are_checked(
    svc: Services, issuers: WorkloadIssuers, overrides: dict[str, Any], reason: str
) -> None:
    now = overrides.pop("now", None)
    claims = {"repository": "acme/infra-live", **overrides}
    token = issuers["github"].sign(AUDIENCE, now=now, **claims)
    with pytest.raises(Unauthorized) as refused:
        _principal(svc, token)
    assert reason in str(refused.value).replace("token has expired", "expired")


@pytest.mark.parametrize("alg", ["none", "HS256"])
def test_forged_algorithms_are_refused(svc: Services, issuers: WorkloadIssuers, alg: str) -> None:
    # HS256 keyed with the issuer's public key: the algorithm confusion attack.
    with pytest.raises(Unauthorized, match="algorithm"):
        _principal(svc, issuers["github"].forged(AUDIENCE, alg))


def _shaped(header: object, payload: bytes) -> str:
    head = b64(json.dumps(header).encode())
    return f"{head}.{b64(payload)}.{b64(b'not a signature')}"


@pytest.mark.parametrize(
    ("header", "payload"),
    [
        ({"alg": ["RS256"], "kid": "github-key-1"}, None),
        ({"alg": {"name": "RS256"}, "kid": "github-key-1"}, None),
        ({"alg": "RS256", "kid": "github-key-1"}, b"[" * 5000 + b"]" * 5000),
    ],
    ids=["alg-list", "alg-object", "deeply-nested-payload"],
)
def test_a_token_of_the_wrong_shape_is_401(
    svc: Services, issuers: WorkloadIssuers, header: dict[str, Any], payload: bytes | None
) -> None:
    github = issuers["github"]
    claims = json.dumps(github.claims(AUDIENCE, repository="acme/infra-live")).encode()
    with pytest.raises(Unauthorized):
        _principal(svc, _shaped(header, payload or claims))


def test_an_unknown_kid_fetches_the_jwks_again_at_most_once_a_minute(
    svc: Services, issuers: WorkloadIssuers, monkeypatch: pytest.MonkeyPatch
) -> None:
    github = issuers["github"]
    _principal(svc, github.sign(AUDIENCE, repository="acme/infra-live"))
    fetched = github.jwks_fetches
    rotated = new_key("github-key-2")
    for _ in range(5):  # a stream of tokens signed by a key the issuer does not publish
        with pytest.raises(Unauthorized, match="key its issuer does not publish"):
            _principal(svc, github.sign(AUDIENCE, key=rotated, repository="acme/infra-live"))
    assert github.jwks_fetches == fetched  # within the minute: no fetch at all
    github.keys.append(rotated)  # the issuer rotates
    monkeypatch.setattr(issuer_module, "REFRESH_INTERVAL", 0.0)  # a minute later
    try:
        found = _principal(svc, github.sign(AUDIENCE, key=rotated, repository="acme/infra-live"))
        assert found.allows(Scope.read, "acme")
        assert github.jwks_fetches == fetched + 1
    finally:
        github.keys.remove(rotated)


def test_a_known_token_costs_no_network_and_no_second_check(
    svc: Services, issuers: WorkloadIssuers, monkeypatch: pytest.MonkeyPatch
) -> None:
    github = issuers["github"]
    token = github.sign(AUDIENCE, repository="acme/infra-live")
    first = _principal(svc, token)
    fetched = github.jwks_fetches, github.discovery_fetches

    def no_second_check(*args: object) -> None:
        raise AssertionError("a known token was verified again")

    monkeypatch.setattr("gitreg.workload_identity.service.verify", no_second_check)
    for _ in range(3):
        assert _principal(svc, token) == first
    assert (github.jwks_fetches, github.discovery_fetches) == fetched


def test_a_pull_request_reads_but_never_publishes(svc: Services, issuers: WorkloadIssuers) -> None:
    github = issuers["github"]
    pushed = _principal(
        svc, github.sign(AUDIENCE, repository="acme/provider-ourcloud", ref="refs/tags/v1.0.0")
    )
    assert pushed.allows(Scope.publish, "acme")
    # A pull request's job (forks open them) whose claims match the publish rule.
    proposed = _principal(
        svc,
        github.sign(
            AUDIENCE,
            repository="acme/provider-ourcloud",
            ref="refs/tags/v1.0.0",
            event_name="pull_request",
        ),
    )
    assert proposed.allows(Scope.read, "acme")
    assert not proposed.allows(Scope.publish, "acme")


def test_a_publish_rule_naming_event_name_lets_pull_requests_publish(
    tmp_path: Path, issuers: WorkloadIssuers
) -> None:
    extra = f"""
[[workload_identity]]
issuer = "{issuers["github"].url}"
audience = "https://previews.example.com"
ca_file = "{issuers.ca_file}"

[[workload_identity.rules]]
claims = {{ repository = "acme/previews", event_name = "pull_request" }}
namespace = "previews"
scope = "publish"
"""
    write_config(tmp_path / "data", workload_config(issuers, extra))
    services = make_services(tmp_path / "data")
    try:
        token = issuers["github"].sign(
            "https://previews.example.com", repository="acme/previews", event_name="pull_request"
        )
        assert _principal(services, token).allows(Scope.publish, "previews")
    finally:
        services.close()


def test_gitlab_publishes_from_protected_refs_only(svc: Services, issuers: WorkloadIssuers) -> None:
    gitlab = issuers["gitlab"]
    protected = _principal(svc, gitlab.sign(AUDIENCE, ref="v1.2.0", ref_type="tag"))
    assert protected.allows(Scope.publish, "acme")
    unprotected = gitlab.sign(AUDIENCE, ref="feature-x", ref_protected="false")
    with pytest.raises(Forbidden, match=NO_RULE):
        _principal(svc, unprotected)


def test_kubernetes_service_accounts_match_by_nested_claims(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    kubernetes = issuers["kubernetes"]
    found = _principal(svc, kubernetes.sign(AUDIENCE))
    assert found.allows(Scope.read, "acme")
    assert "system:serviceaccount:ci:terraform" in found.subject
    with pytest.raises(Forbidden, match=NO_RULE):
        _principal(svc, kubernetes.sign(AUDIENCE, serviceaccount="deployer"))


def test_an_unreachable_issuer_is_503_and_remembered(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    config = f"""
[[workload_identity]]
issuer = "https://127.0.0.1:{port}/github"
audience = "{AUDIENCE}"

[[workload_identity.rules]]
claims = {{ repository = "acme/infra-live" }}
namespace = "acme"
scope = "read"
"""
    write_config(tmp_path / "data", config)
    services = make_services(tmp_path / "data")
    issuer = Issuer("github", f"https://127.0.0.1:{port}/github", [new_key("k")])
    try:
        token = issuer.sign(AUDIENCE, repository="acme/infra-live")
        with pytest.raises(IssuerUnavailable) as unavailable:
            _principal(services, token)
        assert unavailable.value.status == 503
        started = time.monotonic()
        with pytest.raises(IssuerUnavailable):  # remembered: no second wait
            _principal(services, token)
        assert time.monotonic() - started < 0.5
    finally:
        services.close()


def test_each_first_use_is_one_audit_row_naming_the_rule(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    allowed = issuers["github"].sign(AUDIENCE, repository="acme/infra-live")
    refused = issuers["github"].sign(AUDIENCE, repository="acme/elsewhere")
    for _ in range(3):
        _principal(svc, allowed)
        with pytest.raises(Forbidden):
            _principal(svc, refused)
    rows = svc.audit.entries(AuditQuery(action="sign_in.workload"))
    assert [(r.result, r.rule, r.client) for r in rows] == [
        ("refused", "", "203.0.113.7"),
        ("ok", "workload_identity[1].rules[1]", "203.0.113.7"),
    ]
    assert rows[0].detail == NO_RULE
    assert all(r.actor_kind == "workload" for r in rows)


def test_concurrent_first_uses_of_one_token_are_one_audit_row(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    token = issuers["github"].sign(AUDIENCE, repository="acme/infra-live", run_id="77")

    async def at_once() -> list[Principal | None]:
        who = Credentials(f"Bearer {token}", "203.0.113.8")
        return list(await asyncio.gather(*(svc.access.principal(who) for _ in range(8))))

    found = asyncio.run(at_once())
    assert all(p is not None and p.allows(Scope.read, "acme") for p in found)
    assert len(svc.audit.entries(AuditQuery(action="sign_in.workload"))) == 1


def test_a_first_use_whose_audit_row_fails_is_a_first_use_again(
    svc: Services, issuers: WorkloadIssuers, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = issuers["github"].sign(AUDIENCE, repository="acme/infra-live", run_id="78")
    record = svc.audit.record

    def database_down(*args: Any, **kwargs: Any) -> None:
        raise DatabaseUnavailable("the index is away")

    monkeypatch.setattr(svc.audit, "record", database_down)
    with pytest.raises(DatabaseUnavailable):
        _principal(svc, token)
    monkeypatch.setattr(svc.audit, "record", record)
    assert _principal(svc, token).allows(Scope.read, "acme")
    (row,) = svc.audit.entries(AuditQuery(action="sign_in.workload"))
    assert row.result == "ok"
