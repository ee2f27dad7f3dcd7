"""Structured logs: one JSON access line per request carrying the
request id the response carries, job lines with their job and repository, and
nothing secret in any line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.types import Message, Receive, Scope, Send

from gitreg import logs
from gitreg.server.access_log import AccessLog
from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import RunningServer, cli, start_server

TOKEN = "gitreg_" + "A" * 43


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _access_lines(server: RunningServer, *request_ids: str) -> dict[str, dict[str, object]]:
    """The access lines by request id, once every id asked for has its line.

    The line is written after the last byte is sent (its duration covers the
    send), so a fast client can read the log a moment before it lands."""
    deadline = time.monotonic() + 10
    while True:
        lines = {
            str(line["request_id"]): line
            for line in _json_lines(server.log())
            if line["logger"] == "gitreg.access"
        }
        if all(rid in lines for rid in request_ids) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("logs")
    repo = GitRepo(root / "vpc")
    simple_module(repo, "hello")
    repo.commit()
    repo.tag("v1.0.0")
    cli(root / "data", "repo", "add", str(repo.path), "--module", "acme/vpc/null")
    running = start_server(root / "data", env={"GITREG_LOG_FORMAT": "json"})
    yield running
    running.stop()


def _get(server: RunningServer, path: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(server.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, context=server.ssl_context(), timeout=10) as answer:
            answer.read()
            return answer.status, answer.headers["X-Request-Id"]
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["X-Request-Id"]


def test_every_request_has_one_json_line_with_the_id_the_response_carries(
    server: RunningServer,
) -> None:
    status, given = _get(server, "/v1/modules/acme/vpc/null/versions", {"X-Request-Id": "req-42"})
    assert (status, given) == (200, "req-42")  # a sane id from the proxy is kept
    status, made = _get(server, "/v1/modules/acme/nope/null/versions", {})
    assert status == 404 and len(made) == 16  # none sent: one is made up
    _, replaced = _get(server, "/.well-known/terraform.json", {"X-Request-Id": "bad id\\x"})
    assert replaced != "bad id\\x"
    _, unlogged = _get(server, "/.well-known/terraform.json", {"X-Request-Id": TOKEN})
    assert unlogged != TOKEN  # shaped like a credential: replaced, never logged
    lines = _access_lines(server, "req-42", made, replaced, unlogged)
    first = lines["req-42"]
    assert first["route"] == "/v1/modules/{namespace}/{name}/{system}/versions"
    assert (first["method"], first["status"], first["client"]) == ("GET", 200, "127.0.0.1")
    size = first["bytes"]
    assert isinstance(first["duration_ms"], float) and isinstance(size, int) and size > 0
    assert lines[made]["status"] == 404
    assert replaced in lines and unlogged in lines
    assert TOKEN[7:] not in server.log()


def test_the_access_line_names_the_token_by_id_only(server: RunningServer) -> None:
    token = cli(server.data_dir, "token", "create", "--scope", "admin").stdout.split()[-1]
    time.sleep(1.0)  # the server notices the new token within refresh_interval
    status, rid = _get(server, "/admin/repos", {"Authorization": f"Bearer {token}"})
    assert status == 200
    line = _access_lines(server, rid)[rid]
    assert isinstance(line["token_id"], int)
    assert token not in server.log()


def test_secrets_are_redacted_in_every_format() -> None:
    text = (
        f"GET /archives/x.tar.gz?expires=1&signature=abcDEF_123 Authorization: Bearer {TOKEN}"
        " https://ci:hunter2@git.example/r.git"
    )
    cleaned = logs.redact(text)
    for secret in ("abcDEF_123", TOKEN[7:], "hunter2"):
        assert secret not in cleaned
    for stream_format in ("json", "text"):
        out = io.StringIO()
        logs.configure(stream_format, "INFO", stream=out)
        try:
            logging.getLogger("gitreg.test").warning("saw %s", text)
        finally:
            logs.configure("text", "WARNING")
        assert "hunter2" not in out.getvalue() and "abcDEF_123" not in out.getvalue()


def test_job_lines_carry_the_job_and_the_repository(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo, "hello")
    repo.commit()
    repo.tag("v1.0.0")
    settings = load_settings({"data_dir": tmp_path / "data"}, environ={})
    cli(settings.data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/null", "--no-sync")
    out = io.StringIO()
    logs.configure("json", "INFO", stream=out)
    svc = build_services(settings)
    try:
        [record] = svc.index.repos()
        svc.job_queue.store.enqueue(record.id, "sync", "test", "because", 0.0, 3)
        [job] = svc.job_runner().drain()
    finally:
        svc.close()
        logs.configure("text", "WARNING")
    done = [line for line in _json_lines(out.getvalue()) if "done in" in str(line["msg"])]
    assert done and done[0]["job_id"] == job.id and done[0]["repo_id"] == record.id


class _Route:
    path = "/v1/modules/{namespace}/{name}/{system}/versions"


async def _answer(scope: Scope, receive: Receive, send: Send) -> None:
    scope["route"] = _Route()  # as Starlette's router leaves it
    scope["state"]["token_id"] = 7
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


async def _no_receive() -> Message:
    return {"type": "http.request", "body": b""}


def _request_through_access_log() -> None:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/modules/acme/vpc/null/versions",
        "headers": [(b"x-request-id", b"req-fast")],
        # Escaping must match json.dumps (a proxy-given client can be any text).
        "client": ('fe80::1"\\é', 1234),
        "state": {},
    }
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(AccessLog(_answer)(scope, _no_receive, send))
    assert sent[0]["status"] == 200


def _probe_fast_slow(log_format: str, write: Callable[..., bool]) -> list[str]:
    """Three access lines: one written directly, one through the middleware's
    fast path, one through logging (another handler was added)."""
    out = io.StringIO()
    logs.configure(log_format, "INFO", stream=out)
    context = logs.job.set((3, 4))
    try:
        assert write("GET", "/probe", 200, 0.1, 1, None, None)  # fast path taken...
        _request_through_access_log()  # ...here too
        logging.getLogger().addHandler(logging.NullHandler())  # another handler: via logging
        _request_through_access_log()
    finally:
        logs.job.reset(context)
        logs.configure("text", "WARNING")
    return out.getvalue().splitlines()


def test_the_fast_access_line_is_the_line_the_json_formatter_writes() -> None:
    lines = _probe_fast_slow("json", logs.access_json)
    probe, fast, slow = (json.loads(line) for line in lines)
    assert probe["msg"] == "GET /probe 200 100.0ms" and probe["client"] is None
    assert list(fast) == list(slow)  # the same fields in the same order
    for line in (fast, slow):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(line.pop("ts")))
        assert isinstance(line.pop("duration_ms"), float)
        assert str(line.pop("msg")).startswith(f"GET {_Route.path} 200 ")
    assert fast == slow
    assert fast["client"] == 'fe80::1"\\é' and fast["token_id"] == 7
    assert (fast["request_id"], fast["job_id"], fast["repo_id"]) == ("req-fast", 3, 4)


def test_the_fast_text_access_line_is_the_line_the_text_formatter_writes() -> None:
    """The text access line skips logging too, and writes the
    line TextFormatter would, context and fields in the same order."""
    probe, fast, slow = _probe_fast_slow("text", logs.access_text)
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert re.fullmatch(
        stamp + r" INFO gitreg\.access: GET /probe 200 100\.0ms \[job_id=3 repo_id=4 method=GET"
        r" route=/probe status=200 duration_ms=100\.0 bytes=1\]",
        probe,
    )
    timing = r" \d+\.\dms | duration_ms=[0-9.e-]+ "
    fast_rest, slow_rest = (re.sub(timing, " T ", line[23:]) for line in (fast, slow))
    assert fast_rest == slow_rest
    assert re.fullmatch(stamp, fast[:23]) and re.fullmatch(stamp, slow[:23])
    assert "request_id=req-fast job_id=3 repo_id=4 method=GET" in fast
    assert fast.endswith('client=fe80::1"\\é token_id=7]')
