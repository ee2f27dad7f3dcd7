"""A client that goes away in the middle of its request body, on every route
that reads a body: a real `gitreg serve` over TLS gets a request head with a
Content-Length, part of the body, and then the socket closes. The server logs
one info line saying the client went away, writes the access line with 499
(nginx's "client closed request") and counts 499, never 500, in the metrics;
no traceback and no error line.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route

from gitreg.app import all_routes
from gitreg.settings import load_settings
from tests.metrics.scrape import Samples, fetch, parse, value
from tests.support.server import RunningServer, cli, start_server

DECLARED = 4096
PART = b'{"ref": "refs/tags/v1'  # a sixth of the declared body, then nothing
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
UPLOADS = "/api/v1/providers/{namespace}/{type}/{version}/uploads"
PACKAGE = "terraform-provider-null_1.0.0_linux_amd64.zip"


@dataclass(frozen=True)
class BodyRoute:
    method: str
    template: str  # the route as the access log and the metrics name it
    content_type: str
    publish_token: bool = False  # the route checks a publish token before the body


BODY_ROUTES = [
    BodyRoute("POST", "/webhooks/github", JSON),
    BodyRoute("POST", "/webhooks/gitlab", JSON),
    BodyRoute("POST", "/webhooks/gitea", JSON),
    BodyRoute("POST", "/webhooks/bitbucket", JSON),
    BodyRoute("POST", "/webhooks/git", JSON, publish_token=True),
    BodyRoute("POST", "/oauth/token", FORM),
    BodyRoute("POST", "/ui/token", FORM),
    BodyRoute("POST", "/ui/sign-in", FORM),
    BodyRoute("POST", "/ui/sign-out", FORM),
    BodyRoute("POST", "/ui/tokens", FORM),
    BodyRoute("POST", "/ui/tokens/revoke", FORM),
    BodyRoute("POST", "/ui/admin/tokens/revoke", FORM),
    BodyRoute("PUT", UPLOADS + "/{upload_id}/{filename}", "application/zip", True),
    BodyRoute("POST", UPLOADS + "/{upload_id}/publish", JSON, publish_token=True),
]
# Routes that take a request body but answer without reading it.
NO_BODY_READ = {
    ("POST", UPLOADS),  # creates an upload from its path alone
    ("POST", "/admin/jobs/{job_id}/retry"),
}


def test_every_route_that_may_take_a_body_is_covered_here() -> None:
    settings = load_settings(
        {"oidc_issuer": "https://idp.example", "oidc_client_id": "gitreg"}, environ={}
    )
    taking = {
        (method, route.path)
        for route in all_routes(settings)
        if isinstance(route, Route)
        for method in route.methods or ()
        if method not in ("GET", "HEAD")
    }
    covered = {(r.method, r.template) for r in BODY_ROUTES}
    assert taking == covered | NO_BODY_READ


@dataclass
class Registry:
    server: RunningServer
    admin: str
    publisher: str
    upload_id: str

    def path(self, route: BodyRoute) -> str:
        fields = {
            "namespace": "acme",
            "type": "null",
            "version": "1.0.0",
            "upload_id": self.upload_id,
            "filename": PACKAGE,
        }
        return route.template.format(**fields)

    def scrape(self) -> Samples:
        status, text = fetch(self.server.url + "/metrics", self.admin, self.server.ssl_context())
        assert status == 200, text
        return parse(text)

    def lines(self) -> list[dict[str, Any]]:
        text = self.server.log()
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def access_line(self, rid: str) -> dict[str, Any]:
        """The access line of request `rid`, once written (it follows the answer)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for line in self.lines():
                if line["logger"] == "gitreg.access" and line.get("request_id") == rid:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no access line for {rid}:\n{self.server.log()}")

    def healthz(self, rid: str) -> None:
        request = urllib.request.Request(
            self.server.url + "/healthz", headers={"X-Request-Id": rid}
        )
        with urllib.request.urlopen(request, context=self.server.ssl_context()) as answer:
            assert answer.status == 200


def _token(data: Path, *args: str) -> str:
    return cli(data, "token", "create", *args).stdout.strip().splitlines()[-1]


def _create_upload(server: RunningServer, publisher: str) -> str:
    url = server.url + UPLOADS.format(namespace="acme", type="null", version="1.0.0")
    request = urllib.request.Request(
        url, data=b"", headers={"Authorization": f"Bearer {publisher}"}, method="POST"
    )
    with urllib.request.urlopen(request, context=server.ssl_context()) as answer:
        assert answer.status == 201
        return str(json.loads(answer.read())["upload_id"])


def _registry(root: Path, env: dict[str, str]) -> Iterator[Registry]:
    data = root / "data"
    admin = _token(data, "--scope", "admin")
    publisher = _token(data, "--scope", "publish", "--namespace", "acme")
    settings = {
        "GITREG_LOG_FORMAT": "json",
        # Sign-in configured so its routes exist; the issuer is never reached:
        # each request here ends before anything is asked of it.
        "GITREG_OIDC_ISSUER": "https://127.0.0.1:9/issuer",
        "GITREG_OIDC_CLIENT_ID": "gitreg",
        "GITREG_OIDC_CLIENT_SECRET": "not-used",
        **env,
    }
    server = start_server(data, "--reconcile-interval", "0", env=settings)
    try:
        yield Registry(server, admin, publisher, _create_upload(server, publisher))
    finally:
        server.stop()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    yield from _registry(tmp_path_factory.mktemp("gone"), {})


@pytest.fixture(scope="module")
def registry_h11(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    yield from _registry(tmp_path_factory.mktemp("gone-h11"), {"GITREG_HTTP_IMPL": "h11"})


def _go_away_mid_body(registry: Registry, route: BodyRoute, rid: str) -> None:
    """Send the head and a part of the declared body, then close the socket."""
    server = registry.server
    head = [
        f"{route.method} {registry.path(route)} HTTP/1.1",
        f"Host: {server.host}",
        f"Content-Type: {route.content_type}",
        f"Content-Length: {DECLARED}",
        f"X-Request-Id: {rid}",
    ]
    if route.publish_token:
        head.append(f"Authorization: Bearer {registry.publisher}")
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    with server.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + PART)


def _assert_gone(registry: Registry, route: BodyRoute, rid: str) -> None:
    before = registry.scrape()
    _go_away_mid_body(registry, route, rid)
    access = registry.access_line(rid)
    # Every line the request caused comes before the next request's access line.
    registry.healthz(f"{rid}-after")
    registry.access_line(f"{rid}-after")
    after = registry.scrape()
    lines = registry.lines()
    start = next(i for i, line in enumerate(lines) if line.get("request_id") == rid)
    end = next(i for i, line in enumerate(lines) if line.get("request_id") == f"{rid}-after")
    window = lines[start:end]

    assert (access["route"], access["method"], access["status"]) == (
        route.template,
        route.method,
        499,
    )
    own = [
        line
        for line in window
        if line.get("request_id") == rid and line["logger"] != "gitreg.access"
    ]
    assert [(line["level"], line["logger"]) for line in own] == [("info", "gitreg.app")], own
    assert "went away" in own[0]["msg"]
    troubled = [line for line in window if line["level"] not in ("debug", "info") or "exc" in line]
    assert troubled == []

    labels = {"route": route.template, "method": route.method}
    for status, grew in (("499", 1), ("500", 0)):
        was = value(before, "gitreg_http_requests_total", status=status, **labels)
        assert value(after, "gitreg_http_requests_total", status=status, **labels) == was + grew


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: f"{r.method} {r.template}")
def test_a_client_gone_mid_body_is_one_info_line_and_a_499(
    registry: Registry, route: BodyRoute
) -> None:
    _assert_gone(registry, route, f"gone-{BODY_ROUTES.index(route)}")


def test_a_client_gone_mid_body_on_the_h11_protocol(registry_h11: Registry) -> None:
    _assert_gone(registry_h11, BODY_ROUTES[0], "gone-h11")


def test_the_whole_server_log_holds_no_traceback(registry: Registry) -> None:
    """Last of this file: it stops the module's server to read its whole log."""
    for n, route in enumerate(BODY_ROUTES[:2]):
        _go_away_mid_body(registry, route, f"again-{n}")
        registry.access_line(f"again-{n}")
    registry.server.stop()  # every line is written once the process has exited
    assert "Traceback" not in registry.server.log()
