"""`GET /v1/admin/audit` on a real `gitreg serve`: pages that lead on to the
end whatever `limit` asks, and admin tokens only."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import RunningServer, cli, start_server

ROWS = 1500


@dataclass
class Site:
    server: RunningServer
    tokens: dict[str, str]

    def get(self, token: str, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[token]}"} if token else {}
        with httpx.Client(base_url=self.server.url, verify=self.server.ssl_context()) as client:
            return client.get("/v1/admin/audit", params=params, headers=headers)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    data_dir: Path = tmp_path_factory.mktemp("audit-http") / "data"

    def token(*args: str) -> str:
        return str(cli(data_dir, "token", "create", *args).stdout.split()[-1])

    tokens = {
        "admin": token("--scope", "admin"),
        "namespace admin": token("--scope", "admin", "--namespace", "acme"),
        "read": token("--scope", "read"),
    }
    # Rows enough for more than one page of the largest size.
    with sqlite3.connect(data_dir / "index.sqlite3") as db:
        db.executemany(
            "INSERT INTO audit_log (at, actor_kind, actor, rule, action, object, result,"
            " client, request_id, detail) VALUES (?, 'operator', 'root', '', 'token.create',"
            " ?, 'ok', 'cli', '', '')",
            [(time.time(), f"token t{n}") for n in range(ROWS)],
        )
    server = start_server(data_dir)
    yield Site(server, tokens)
    server.stop()


def test_pages_lead_to_the_end_even_when_limit_asks_for_more_than_a_page(site: Site) -> None:
    seen: list[int] = []
    params: dict[str, Any] = {"limit": 5000, "action": "token.create"}
    while True:
        answer = site.get("admin", **params)
        assert answer.status_code == 200
        body = answer.json()
        assert len(body["entries"]) <= 1000
        seen += [e["id"] for e in body["entries"]]
        if "next" not in body:
            break
        params["before"] = body["next"]
    assert len(seen) == len(set(seen)) == ROWS + 3  # and the three tokens made above
    assert seen == sorted(seen, reverse=True)


def test_only_a_registry_wide_admin_token_reads_the_log(site: Site) -> None:
    assert site.get("", limit=1).status_code == 401
    assert site.get("read", limit=1).status_code == 403
    assert site.get("namespace admin", limit=1).status_code == 403
    assert site.get("admin", limit="0").status_code == 400
