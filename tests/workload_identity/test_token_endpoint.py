"""/oauth/token on a real `gitreg serve` that trusts workload issuers and has
no sign-in: every refused request is RFC 6749 5.2 JSON with a 4xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import RunningServer, free_port, start_server
from tests.support.workload_issuer import Issuer, WorkloadIssuers, new_key
from tests.workload_identity.conftest import AUDIENCE, workload_config, write_config

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
FORM = "application/x-www-form-urlencoded"
# An issuer gitreg trusts that nothing answers for.
LOST = Issuer("github", f"https://127.0.0.1:{free_port()}/lost", [new_key("lost-1")])


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, issuers: WorkloadIssuers
) -> Iterator[RunningServer]:
    data_dir: Path = tmp_path_factory.mktemp("token-endpoint") / "data"
    unreachable = f"""
[[workload_identity]]
issuer = "{LOST.url}"
audience = "{AUDIENCE}"

[[workload_identity.rules]]
claims = {{ repository = "acme/infra-live" }}
namespace = "acme"
scope = "read"
"""
    write_config(data_dir, "auth_fail_limit = 1000\n" + workload_config(issuers, unreachable))
    running = start_server(data_dir)
    yield running
    running.stop()


def _post(server: RunningServer, body: bytes | str, content_type: str = FORM) -> httpx.Response:
    with httpx.Client(base_url=server.url, verify=server.ssl_context()) as client:
        return client.post("/oauth/token", content=body, headers={"Content-Type": content_type})


def _form(*pairs: tuple[str, str]) -> str:
    return str(httpx.QueryParams(list(pairs)))


def _reader(issuers: WorkloadIssuers) -> str:
    return issuers["github"].sign(AUDIENCE, repository="acme/infra-live")


def _refused(answer: httpx.Response, status: int, error: str) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["cache-control"] == "no-store"
    body = answer.json()
    assert body["error"] == error, body
    return str(body["error_description"])


def test_a_field_sent_twice_is_invalid_request(
    server: RunningServer, issuers: WorkloadIssuers
) -> None:
    token = _reader(issuers)
    for twice in (("grant_type", "password"), ("subject_token", "eyJh.b.c")):
        body = _form(
            twice,
            ("grant_type", EXCHANGE),
            ("subject_token", token),
            ("subject_token_type", ID_TOKEN),
        )
        assert "more than once" in _refused(_post(server, body), 400, "invalid_request")


def test_other_grant_types_are_unsupported_without_sign_in(
    server: RunningServer, issuers: WorkloadIssuers
) -> None:
    token = _reader(issuers)
    body = _form(("grant_type", "authorization_code"), ("code", "x"), ("subject_token", token))
    assert EXCHANGE in _refused(_post(server, body), 400, "unsupported_grant_type")
    missing = _form(("subject_token", token), ("subject_token_type", ID_TOKEN))
    assert "grant_type" in _refused(_post(server, missing), 400, "invalid_request")


def test_unknown_fields_are_ignored(server: RunningServer, issuers: WorkloadIssuers) -> None:
    body = _form(
        ("grant_type", EXCHANGE),
        ("subject_token", _reader(issuers)),
        ("subject_token_type", ID_TOKEN),
        ("flavour", "vanilla"),
    )
    assert _post(server, body).status_code == 200


def test_a_scope_beyond_the_rules_is_invalid_scope_and_a_lower_one_narrows(
    server: RunningServer, issuers: WorkloadIssuers
) -> None:
    def exchange(token: str, scope: str) -> httpx.Response:
        body = _form(
            ("grant_type", EXCHANGE),
            ("subject_token", token),
            ("subject_token_type", ID_TOKEN),
            ("scope", scope),
        )
        return _post(server, body)

    _refused(exchange(_reader(issuers), "publish"), 400, "invalid_scope")
    _refused(exchange(_reader(issuers), "read everything"), 400, "invalid_scope")
    ok = exchange(_reader(issuers), "read")
    assert ok.status_code == 200 and ok.json()["scope"] == "read"


def test_an_oversized_body_or_token_and_other_media_types_are_oauth_errors(
    server: RunningServer,
) -> None:
    token = "eyJ" + "a" * 17_000 + ".b.c"
    body = _form(
        ("grant_type", EXCHANGE), ("subject_token", token), ("subject_token_type", ID_TOKEN)
    )
    assert "bytes" in _refused(_post(server, body), 400, "invalid_request")
    _refused(_post(server, "grant_type=" + "a" * 100_000), 413, "invalid_request")
    _refused(_post(server, '{"grant_type": "x"}', "application/json"), 400, "invalid_request")


def test_an_issuer_that_cannot_be_reached_is_503_temporarily_unavailable(
    server: RunningServer,
) -> None:
    token = LOST.sign(AUDIENCE, repository="acme/infra-live")
    body = _form(
        ("grant_type", EXCHANGE), ("subject_token", token), ("subject_token_type", ID_TOKEN)
    )
    answer = _post(server, body)
    assert "cannot be used" in _refused(answer, 503, "temporarily_unavailable")
    assert answer.headers["retry-after"].isdigit()


def test_an_unreachable_issuer_is_logged_once_not_once_per_request(
    server: RunningServer,
) -> None:
    token = LOST.sign(AUDIENCE, repository="acme/infra-live")
    body = _form(
        ("grant_type", EXCHANGE), ("subject_token", token), ("subject_token_type", ID_TOKEN)
    )
    with httpx.Client(base_url=server.url, verify=server.ssl_context()) as client:
        for _ in range(3):
            assert _post(server, body).status_code == 503
            bearer = {"Authorization": f"Bearer {token}"}
            assert client.get("/v2/", headers=bearer).status_code == 503
    logged = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    assert [(r["level"], r["logger"]) for r in logged if LOST.url in r["msg"]] == [
        ("warning", "gitreg.workload_identity")
    ]
    assert [r for r in logged if r["level"] in ("error", "critical")] == []
