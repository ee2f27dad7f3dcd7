"""Property-based tests of every webhook endpoint.

Random bodies (JSON shaped like forge payloads, other JSON, bytes), random
header sets and signatures that are absent, wrong or correct go to
`/webhooks/github`, `/gitlab`, `/gitea`, `/bitbucket` and `/git`. Whatever
arrives, the answer is never a 5xx and always JSON: `{"errors": [...]}` for a
4xx, `{"status": ...}` otherwise. With no secret configured anywhere, no
forge delivery is ever accepted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.webhooks.bitbucket import Bitbucket
from gitreg.webhooks.gitea import Gitea
from gitreg.webhooks.github import GitHub
from gitreg.webhooks.gitlab import GitLab

SECRET = "fuzz-webhook-secret"
FORGE_REPO = "acme/terraform-null-hello"
FORGES = ("github", "gitlab", "gitea", "bitbucket")
ROUTES = (*FORGES, "git")

FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same examples on every run: deterministic CI
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class Registry:
    client: TestClient
    svc: Services
    token: str

    def jobs(self) -> int:
        return len(self.svc.job_queue.store.jobs())


def _registry(data_dir: Path, secret: str) -> Iterator[Registry]:
    flags = {
        "data_dir": data_dir,
        "job_workers": 0,  # deliveries only queue jobs; nothing runs git
        "reconcile_interval": 0,
        "auth_fail_limit": 1_000_000,  # random bad tokens must not lock out the good one
    }
    app = create_app(load_settings(flags, environ={}))
    svc: Services = app.state.services
    record = svc.index.add_repo(str(data_dir.parent / "remote.git"), FORGE_REPO, secret)
    svc.index.add_module(record.id, "acme", "hello", "null", "", "")
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "publish", ["acme"], "", None)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver") as client:
        yield Registry(client, svc, token)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A repository with a webhook secret, and a publish token for its namespace."""
    yield from _registry(tmp_path_factory.mktemp("fuzz-open") / "data", SECRET)


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """The same repository with no secret, and no default secret."""
    yield from _registry(tmp_path_factory.mktemp("fuzz-closed") / "data", "")


# -- strategies -----------------------------------------------------------------------

TAG_REFS = st.one_of(
    st.sampled_from(["v1.0.0", "1.2.3", "v2.0.0-rc.1+build.5", "vpc/v1.0.0"]),
    st.text(max_size=20),
).map(lambda tag: "refs/tags/" + tag)
TEXTS = st.one_of(
    st.text(max_size=30),
    TAG_REFS,
    st.sampled_from(
        [
            "refs/tags/",
            "refs/heads/main",
            "refs/tags/../../x",
            "refs/tags/-v1.0.0",
            "refs/tags/v1\x00",
            "refs/tags/\ud800",  # a lone surrogate: valid JSON, not valid Unicode
            "\ud800",
            "v1.0.0",
            "tag",
            "TAG",
            "ADD",
            "UPDATE",
            "DELETE",
            "published",
            "created",
            "create",
            "update",
            "tag_push",
            "release",
            FORGE_REPO,
            "0" * 40,
            "1" * 40,
            "x" * 3000,
        ]
    ),
)
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        TEXTS,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` three times in four; otherwise any JSON value (often of a wrong type)."""
    return st.one_of(good, good, good, JSON_VALUES)


SHAS = st.sampled_from(["0" * 40, "1" * 40, "2" * 40, "", "not-a-sha"])
REF_OBJECT = st.fixed_dictionaries(
    {},
    optional={
        "type": _mostly(st.sampled_from(["tag", "branch", "TAG", "BRANCH"])),
        "name": _mostly(TEXTS),
        "id": _mostly(TAG_REFS),
        "displayId": _mostly(TEXTS),
    },
)
CHANGE = st.fixed_dictionaries(
    {},
    optional={
        "new": st.one_of(st.none(), REF_OBJECT, REF_OBJECT, JSON_VALUES),
        "old": st.one_of(st.none(), REF_OBJECT, REF_OBJECT, JSON_VALUES),
        "truncated": _mostly(st.booleans()),
        "ref": _mostly(REF_OBJECT),
        "refId": _mostly(TAG_REFS),
        "type": _mostly(st.sampled_from(["ADD", "DELETE", "UPDATE", "OTHER"])),
    },
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "ref": _mostly(st.one_of(TAG_REFS, TEXTS)),
    "before": _mostly(SHAS),
    "after": _mostly(SHAS),
    "ref_type": _mostly(st.sampled_from(["tag", "branch"])),
    "action": _mostly(st.sampled_from(["published", "created", "released", "create", "edited"])),
    "object_kind": _mostly(st.sampled_from(["tag_push", "release", "push", "merge_request"])),
    "tag": _mostly(TEXTS),
    "created": _mostly(st.booleans()),
    "deleted": _mostly(st.booleans()),
    "zen": _mostly(TEXTS),
    "delivery": _mostly(TEXTS),
    "release": _mostly(st.fixed_dictionaries({}, optional={"tag_name": _mostly(TEXTS)})),
    "changes": _mostly(st.lists(CHANGE, max_size=3)),
    "push": _mostly(st.fixed_dictionaries({"changes": _mostly(st.lists(CHANGE, max_size=3))})),
    "refs": _mostly(
        st.lists(
            st.fixed_dictionaries(
                {}, optional={"ref": _mostly(TAG_REFS), "old": SHAS, "new": SHAS}
            ),
            max_size=3,
        )
    ),
}


# The fields each endpoint reads, the most important first.
ROUTE_FIELDS = {
    "github": ["ref", "created", "deleted", "ref_type", "release", "action", "zen"],
    "gitlab": ["object_kind", "ref", "before", "after", "action", "tag"],
    "gitea": ["ref", "before", "after", "ref_type", "release", "action"],
    "bitbucket": ["changes", "push"],
    "git": ["refs", "delivery"],
}


def _identity(route: str, name: Any) -> dict[str, Any]:
    """Where each endpoint reads the repository's name from."""
    if route == "git":
        return {"repository": name}
    if route == "gitlab":
        return {"project": {"path_with_namespace": name}}
    if route == "bitbucket" and isinstance(name, str) and "/" in name:
        key, _, slug = name.partition("/")
        return {"repository": {"full_name": name, "project": {"key": key}, "slug": slug}}
    return {"repository": {"full_name": name}}


@st.composite
def payloads(draw: st.DrawFn, route: str, registered: bool) -> bytes:
    """A JSON object shaped like a delivery to `route`, with hostile values;
    `registered`: it names the registered repository (in some spelling)."""
    own = ROUTE_FIELDS[route]
    chosen = {own[0], *draw(st.lists(st.sampled_from(own), max_size=4))}
    chosen |= set(draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=2)))
    payload: dict[str, Any] = {key: draw(FIELDS[key]) for key in sorted(chosen)}
    if registered:
        name = draw(st.sampled_from([FORGE_REPO, FORGE_REPO.upper(), FORGE_REPO.title()]))
    else:
        name = draw(st.one_of(st.none(), TEXTS, JSON_VALUES))
    if name is not None:
        payload.update(_identity(route, name))
    return json.dumps(payload).encode()


def bodies(route: str) -> st.SearchStrategy[bytes]:
    """Anything: delivery-shaped JSON, other JSON, bytes, known troublemakers."""
    return st.one_of(
        payloads(route, registered=True),
        payloads(route, registered=False),
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=300),
        st.sampled_from(
            [
                b"",
                b"{",
                b"null",
                b'{"a": NaN}',
                b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark
                b"\xff\xfe{\x00}\x00",  # UTF-16
                b"[" * 50_000 + b"]" * 50_000,
                b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
                b"payload=%7B%7D",
            ]
        ),
    )


HEADER_NAMES = [
    "x-github-event",
    "x-github-delivery",
    "x-hub-signature-256",
    "x-hub-signature",
    "x-gitlab-event",
    "x-gitlab-token",
    "x-gitlab-event-uuid",
    "idempotency-key",
    "x-gitea-event",
    "x-gitea-signature",
    "x-gitea-delivery",
    "x-forgejo-event",
    "x-forgejo-signature",
    "x-forgejo-delivery",
    "x-event-key",
    "x-request-uuid",
    "x-request-id",
    "authorization",
    "content-type",
]
EVENTS = [
    "push",
    "create",
    "delete",
    "release",
    "ping",
    "issues",
    "Tag Push Hook",
    "Release Hook",
    "System Hook",
    "repo:push",
    "repo:refs_changed",
    "diagnostics:ping",
]
# Header bytes as a real HTTP server passes them on (no CR, LF or NUL; obs-text allowed).
HEADER_VALUES = st.one_of(
    st.sampled_from(EVENTS),
    st.sampled_from(["sha256=", "sha256=" + "0" * 64, "Bearer ", "Bearer gitreg_x", SECRET]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f")),
).map(lambda v: v.encode("latin-1"))
EVENT_HEADERS = {
    "github": ("x-github-event",),
    "gitlab": ("x-gitlab-event",),
    "gitea": ("x-gitea-event", "x-forgejo-event"),
    "bitbucket": ("x-event-key",),
    "git": (),
}
ROUTE_EVENTS = {
    "github": ["push", "create", "delete", "release", "ping", "issues"],
    "gitlab": ["Tag Push Hook", "Release Hook", "System Hook", "Push Hook"],
    "gitea": ["push", "create", "delete", "release"],
    "bitbucket": ["repo:push", "repo:refs_changed", "diagnostics:ping", "pullrequest:created"],
    "git": [],
}


@st.composite
def header_sets(draw: st.DrawFn, route: str) -> dict[str, bytes]:
    """Random headers, usually with an event name this route's forge sends."""
    headers = draw(st.dictionaries(st.sampled_from(HEADER_NAMES), HEADER_VALUES, max_size=6))
    for name in EVENT_HEADERS[route]:
        # Hypothesis favours the first branch; the forge's own events come first.
        event = draw(
            st.one_of(st.sampled_from(ROUTE_EVENTS[route]), st.sampled_from(EVENTS), st.none())
        )
        if event is not None:
            headers[name] = event.encode()
    return headers


PROOF_HEADERS = {
    "github": "x-hub-signature-256",
    "gitlab": "x-gitlab-token",
    "gitea": "x-gitea-signature",
    "bitbucket": "x-hub-signature",
    "git": "authorization",
}


def _hex(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _authenticate(
    route: str, headers: dict[str, bytes], body: bytes, registry: Registry, how: str
) -> None:
    """Add what makes the delivery authentic (`valid`) or not (`none`, `wrong`)."""
    name = PROOF_HEADERS[route]
    if how == "none":
        headers.pop(name, None)
        return
    secret = SECRET if how == "valid" else "not-the-secret"
    token = registry.token if how == "valid" else new_token()
    value = {
        "github": "sha256=" + _hex(body, secret),
        "gitlab": secret,
        "gitea": _hex(body, secret),
        "bitbucket": "sha256=" + _hex(body, secret),
        "git": f"Bearer {token}",
    }[route]
    headers[name] = value.encode()
    if route == "gitea":
        headers.pop("x-forgejo-signature", None)  # Forgejo's name would win over ours


def _wire(headers: dict[str, bytes]) -> dict[bytes, bytes]:
    """Header names as bytes too, as httpx sends them: values stay raw bytes, so
    the fuzzed non-ASCII and control bytes reach the server unchanged."""
    return {name.encode("ascii"): value for name, value in headers.items()}


def _check(answer: Any) -> None:
    assert answer.status_code < 500, answer.text
    assert answer.headers["content-type"] == "application/json", answer.headers
    document = answer.json()
    assert isinstance(document, dict)
    if answer.status_code >= 400:
        errors = document["errors"]
        assert isinstance(errors, list) and errors
        assert all(isinstance(e, str) and e for e in errors)
    else:
        assert isinstance(document["status"], str)


# -- properties -----------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_random_deliveries_never_give_a_5xx(registry: Registry, route: str) -> None:
    @FUZZ
    @given(
        body=bodies(route),
        headers=header_sets(route),
        how=st.sampled_from(["none", "wrong", "valid", "valid", "valid"]),
    )
    def deliver(body: bytes, headers: dict[str, bytes], how: str) -> None:
        _authenticate(route, headers, body, registry, how)
        answer = registry.client.post(f"/webhooks/{route}", content=body, headers=_wire(headers))
        _check(answer)
        if how != "valid":
            assert answer.status_code >= 400

    deliver()


@pytest.mark.parametrize("route", ROUTES)
def test_authentic_deliveries_never_give_a_5xx(registry: Registry, route: str) -> None:
    """Correctly signed (or token-bearing) deliveries for the registered
    repository with hostile fields: interpreted, queued or refused, never a 5xx.
    A 2xx that says `queued` has stored its job before answering."""

    @FUZZ
    @given(body=payloads(route, registered=True), headers=header_sets(route))
    def deliver(body: bytes, headers: dict[str, bytes]) -> None:
        _authenticate(route, headers, body, registry, "valid")
        answer = registry.client.post(f"/webhooks/{route}", content=body, headers=_wire(headers))
        _check(answer)
        if answer.status_code == 202:
            assert answer.json()["status"] == "queued"
            for job in answer.json()["jobs"]:
                assert registry.svc.job_queue.store.job(job["id"]).state == "queued"

    deliver()


@pytest.mark.parametrize("route", FORGES)
def test_without_any_secret_no_delivery_is_accepted(closed: Registry, route: str) -> None:
    """Fail closed, for every body, header set and signature, even one
    computed with the empty secret."""

    @settings(FUZZ, max_examples=50)
    @given(body=bodies(route), headers=header_sets(route), empty_signed=st.booleans())
    def deliver(body: bytes, headers: dict[str, bytes], empty_signed: bool) -> None:
        if empty_signed:
            for name in ("x-hub-signature-256", "x-hub-signature"):
                headers[name] = ("sha256=" + _hex(body, "")).encode()
            headers["x-gitea-signature"] = _hex(body, "").encode()
            headers["x-gitlab-token"] = b""
        answer = closed.client.post(f"/webhooks/{route}", content=body, headers=_wire(headers))
        _check(answer)
        assert answer.status_code in (400, 401, 404, 413), answer.text

    deliver()
    assert closed.jobs() == 0


# -- regressions found by the properties ---------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("where", ["repository", "tag"])
def test_lone_surrogates_in_a_payload_are_a_400(registry: Registry, route: str, where: str) -> None:
    """JSON may escape a lone surrogate (`"\\ud800"`), which SQLite cannot store:
    unchecked, it would reach the repository lookup unauthenticated and answer 500."""
    name = "\ud800" if where == "repository" else FORGE_REPO
    payload: dict[str, Any] = {
        **_identity(route, name),
        "ref": "refs/tags/v1.0.0\ud800",
        "object_kind": "tag_push",
        "refs": [{"ref": "refs/tags/v1.0.0\ud800", "old": "0" * 40, "new": "1" * 40}],
        "changes": [{"ref": {"id": "refs/tags/v1.0.0\ud800", "type": "TAG"}, "type": "ADD"}],
    }
    body = json.dumps(payload).encode()
    headers = {
        "x-github-event": b"push",
        "x-gitea-event": b"push",
        "x-event-key": b"repo:refs_changed",
    }
    _authenticate(route, headers, body, registry, "valid")
    answer = registry.client.post(f"/webhooks/{route}", content=body, headers=_wire(headers))
    _check(answer)
    assert answer.status_code == 400
    assert "not valid Unicode" in answer.json()["errors"][0]


# -- constant-time comparison ---------------------------------------------------------


@pytest.mark.parametrize(
    ("forge", "header", "good"),
    [
        (GitHub(), "x-hub-signature-256", "sha256=" + _hex(b"{}", SECRET)),
        (Bitbucket(), "x-hub-signature", "sha256=" + _hex(b"{}", SECRET)),
        (Gitea(), "x-gitea-signature", _hex(b"{}", SECRET)),
        (Gitea(), "x-forgejo-signature", _hex(b"{}", SECRET)),
        (GitLab(), "x-gitlab-token", SECRET),
    ],
)
def test_every_forge_check_goes_through_compare_digest(
    monkeypatch: pytest.MonkeyPatch, forge: Any, header: str, good: str
) -> None:
    """Right, wrong, shorter and longer proofs are all decided by one
    `hmac.compare_digest` call: no early exit on length or first difference."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    for sent, expected in [
        (good, True),
        (good[:-1] + ("0" if good[-1] != "0" else "1"), False),
        (good[:5], False),
        (good + "00", False),
    ]:
        calls.clear()
        assert forge.verify({header: sent}, b"{}", SECRET) is expected
        assert len(calls) == 1, (sent, calls)
        assert all(isinstance(part, bytes) for part in calls[0])
