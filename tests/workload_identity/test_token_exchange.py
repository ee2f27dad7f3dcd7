"""RFC 8693 token exchange (WorkloadIdentity.exchange; over HTTP at /oauth/token
in tests/e2e/test_e2e_workload_identity.py): a gitreg token limited to the
matched grants and to the ID token's remaining life."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitreg.audit.store import AuditQuery
from gitreg.auth.login import OAuthError
from gitreg.auth.service import Credentials
from gitreg.auth.tokens import Principal, Scope
from gitreg.services import Services
from gitreg.workload_identity.service import (
    ACCESS_TOKEN,
    ID_TOKEN,
    NO_RULE,
    TOKEN_EXCHANGE,
)
from tests.support.provider_dist import make_services
from tests.support.workload_issuer import WorkloadIssuers
from tests.workload_identity.conftest import AUDIENCE, workload_config, write_config


@pytest.fixture
def svc(tmp_path: Path, issuers: WorkloadIssuers) -> Iterator[Services]:
    data_dir = tmp_path / "data"
    write_config(data_dir, "workload_token_ttl = 120\n" + workload_config(issuers))
    services = make_services(data_dir)
    yield services
    services.close()


def _exchange(svc: Services, subject_token: str, **form: str) -> dict[str, object]:
    fields = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject_token,
        "subject_token_type": ID_TOKEN,
        **form,
    }
    return asyncio.run(svc.workload_identity.exchange(fields, "198.51.100.4"))


def _holder(svc: Services, token: str) -> Principal:
    svc.access.refresh_snapshot()
    found = asyncio.run(svc.access.principal(Credentials(f"Bearer {token}", "198.51.100.4")))
    assert found is not None
    return found


def test_an_exchanged_token_has_the_matched_grants_and_the_shorter_life(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    id_token = issuers["github"].sign(AUDIENCE, repository="acme/infra-live")
    answer = _exchange(svc, id_token)
    assert answer["issued_token_type"] == ACCESS_TOKEN
    assert answer["token_type"] == "Bearer"
    assert 110 <= int(str(answer["expires_in"])) <= 120  # workload_token_ttl, under the 300 s left
    holder = _holder(svc, str(answer["access_token"]))
    assert holder.allows(Scope.read, "acme")
    assert not holder.allows(Scope.publish, "acme")
    (made,) = [t for t in svc.tokens.active() if t.id == holder.token_id]
    assert made.subject.endswith("repo:acme/infra-live:ref:refs/heads/main")
    assert made.expires_at is not None and made.expires_at <= time.time() + 120


def test_an_exchanged_token_never_outlives_the_id_token(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    soon = time.time() - 250  # issued 250 s ago: 50 s left
    id_token = issuers["kubernetes"].sign(AUDIENCE, now=soon)
    assert int(str(_exchange(svc, id_token)["expires_in"])) <= 50


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"subject_token_type": ACCESS_TOKEN}, "subject_token_type"),
        ({"requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token"}, "requested"),
        ({"actor_token": "x"}, "actor_token"),
        ({"subject_token": "gitreg_" + "a" * 43}, "not a signed JWT"),
    ],
)
def test_malformed_requests_are_invalid_request(
    svc: Services, issuers: WorkloadIssuers, form: dict[str, str], message: str
) -> None:
    token = form.pop(
        "subject_token", issuers["github"].sign(AUDIENCE, repository="acme/infra-live")
    )
    with pytest.raises(OAuthError) as refused:
        _exchange(svc, token, **form)
    assert refused.value.error == "invalid_request"
    assert message in refused.value.description


def test_a_token_no_rule_matches_gets_no_token_and_the_rule_free_reason(
    svc: Services, issuers: WorkloadIssuers
) -> None:
    before = len(svc.tokens.active())
    with pytest.raises(OAuthError) as refused:
        _exchange(svc, issuers["github"].sign(AUDIENCE, repository="evil/fork"))
    assert (refused.value.error, refused.value.description) == ("invalid_request", NO_RULE)
    assert len(svc.tokens.active()) == before


def test_exchanges_are_audited_with_the_rule(svc: Services, issuers: WorkloadIssuers) -> None:
    answer = _exchange(svc, issuers["github"].sign(AUDIENCE, repository="acme/infra-live"))
    with pytest.raises(OAuthError):
        _exchange(svc, issuers["github"].sign(AUDIENCE, repository="evil/fork"))
    refused, issued = svc.audit.entries(AuditQuery(action="sign_in.token_exchange"))
    assert (issued.result, issued.rule, issued.client) == (
        "ok",
        "workload_identity[1].rules[1]",
        "198.51.100.4",
    )
    assert issued.object == f"token {str(answer['access_token'])[:12]}"
    assert (refused.result, refused.detail) == ("refused", NO_RULE)


def test_a_requested_scope_narrows_the_token(svc: Services, issuers: WorkloadIssuers) -> None:
    release = issuers["github"].sign(
        AUDIENCE, repository="acme/provider-ourcloud", ref="refs/tags/v1.0.0"
    )
    answer = _exchange(svc, release, scope="read")
    assert answer["scope"] == "read"
    holder = _holder(svc, str(answer["access_token"]))
    assert holder.allows(Scope.read, "acme")
    assert not holder.allows(Scope.publish, "acme")
    with pytest.raises(OAuthError) as refused:
        _exchange(svc, release, scope="admin")
    assert refused.value.error == "invalid_scope"
    (row, *_) = svc.audit.entries(AuditQuery(action="sign_in.token_exchange"))
    assert (row.result, row.detail) == ("refused", "the matched rules do not grant admin")
