"""The browse API from a real `gitreg serve` over TLS, after a real
`gitreg repo add` + `gitreg sync` from a git repository."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.catalog.test_extraction import full_module
from tests.support.gitrepo import GitRepo
from tests.support.server import cli, start_server


def test_a_published_module_is_found_and_documented_over_https(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    data = tmp_path / "data"
    repo = make_repo("terraform-aws-vpc")
    full_module(repo)
    repo.commit()
    repo.tag("v1.1.0")
    cli(data, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    cli(data, "sync", "acme/vpc/aws")
    server = start_server(data)
    try:
        context = server.ssl_context()

        def get(path: str) -> dict[str, object]:
            with urllib.request.urlopen(server.url + path, context=context, timeout=30) as r:
                found = json.loads(r.read())
            assert isinstance(found, dict)
            return found

        hits = get("/v1/modules/search?q=subnets")["modules"]
        assert isinstance(hits, list) and [m["id"] for m in hits] == ["acme/vpc/aws/1.1.0"]
        record = get("/v1/modules/acme/vpc/aws/1.1.0")
        root = record["root"]
        assert isinstance(root, dict)
        assert "<script" not in str(root["readme_html"])
        assert [i["name"] for i in root["inputs"]] == ["name", "cidr", "token"]
    finally:
        server.stop()
