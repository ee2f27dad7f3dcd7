"""The outbound client against answers shaped by hand (httpx.MockTransport):
discovery, metadata validation, https only, caps, SSL_CERT_FILE."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitreg.addresses import provider_address
from gitreg.errors import BadRequest, UpstreamError, UpstreamNotFound, UpstreamTimeout
from gitreg.mirror.options import mirror_options, parse_upstream
from gitreg.mirror.upstream import UpstreamClient, outbound_ssl_context
from gitreg.server.tls import ensure_local_tls
from gitreg.settings import load_settings

NULL = provider_address("registry.terraform.io", "hashicorp", "null")
DOWNLOAD = {
    "protocols": ["5.0"],
    "os": "linux",
    "arch": "amd64",
    "filename": "terraform-provider-null_2.1.2_linux_amd64.zip",
    "download_url": "files/null.zip",
    "shasums_url": "https://cdn.example/SHA256SUMS",
    "shasums_signature_url": "/sig",
    "shasum": "a" * 64,
    "signing_keys": {"gpg_public_keys": [{"key_id": "X", "ascii_armor": "KEY"}]},
}

Handler = Callable[[httpx.Request], httpx.Response]
# MockTransport also takes coroutine handlers, for upstreams that must stall without a thread.
AsyncHandler = Callable[[httpx.Request], Coroutine[Any, Any, httpx.Response]]


def client(handler: Handler | AsyncHandler, tmp_path: Path, **flags: Any) -> UpstreamClient:
    settings = load_settings({"data_dir": tmp_path, **flags}, environ={})
    return UpstreamClient(mirror_options(settings), transport=httpx.MockTransport(handler))


def registry(overrides: dict[str, Any] | None = None, **routes: httpx.Response) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/.well-known/terraform.json"):
            return routes.get("discovery") or httpx.Response(
                200, json={"providers.v1": "/v1/providers/"}
            )
        if path.endswith("/versions"):
            return routes.get("versions") or httpx.Response(
                200, json={"versions": [{"version": "2.1.2"}]}
            )
        if "/download/" in path:
            return routes.get("download") or httpx.Response(
                200, json={**DOWNLOAD, **(overrides or {})}
            )
        return httpx.Response(404)

    return handle


def run(upstream: UpstreamClient, call: Callable[[], Any]) -> Any:
    async def go() -> Any:
        try:
            return await call()
        finally:
            await upstream.aclose()

    return asyncio.run(go())


def test_download_metadata_urls_resolve_against_the_metadata_url(tmp_path: Path) -> None:
    upstream = client(registry(), tmp_path)
    info = run(upstream, lambda: upstream.download(NULL, "2.1.2", "linux_amd64"))
    base = "https://registry.terraform.io/v1/providers/hashicorp/null/2.1.2/download/linux/"
    assert info.download_url == base + "files/null.zip"
    assert info.shasums_url == "https://cdn.example/SHA256SUMS"
    assert info.shasums_signature_url == "https://registry.terraform.io/sig"
    assert info.public_keys == ("KEY",)


def test_discovery_is_cached(tmp_path: Path) -> None:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return registry()(request)

    upstream = client(handle, tmp_path)

    async def twice() -> None:
        await upstream.versions(NULL)
        await upstream.versions(NULL)

    run(upstream, twice)
    assert seen.count("/.well-known/terraform.json") == 1


def test_waiting_for_a_free_upstream_slot_counts_against_the_budget(tmp_path: Path) -> None:
    budget = 0.5

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)  # cut short by the budget
        return httpx.Response(200, content=b"late")

    upstream = client(slow, tmp_path, mirror_concurrency=1, mirror_total_timeout=budget)

    async def timed(n: int) -> tuple[BaseException | None, float]:
        started = time.monotonic()
        try:
            await upstream.fetch_small(f"https://cdn.example/{n}.zip", f"file {n}", 99)
        except Exception as exc:
            return exc, time.monotonic() - started
        return None, time.monotonic() - started

    async def five_at_once() -> list[tuple[BaseException | None, float]]:
        # The first holds the only slot; the others queue behind it and, on the
        # old code, each waited for all before it plus its own budget.
        return await asyncio.gather(*(timed(n) for n in range(5)))

    results = run(upstream, five_at_once)
    assert all(isinstance(error, UpstreamTimeout) for error, _ in results)
    assert max(elapsed for _, elapsed in results) < 3 * budget  # old code: about 5 x budget


def test_mapped_hostname_is_reached_at_its_base_url(tmp_path: Path) -> None:
    hosts: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        hosts.append(str(request.url))
        return registry()(request)

    upstream = client(handle, tmp_path, upstream="registry.terraform.io=https://10.1.2.3:8443/r/")
    run(upstream, lambda: upstream.versions(NULL))
    assert hosts[0] == "https://10.1.2.3:8443/r/.well-known/terraform.json"
    assert hosts[1] == "https://10.1.2.3:8443/v1/providers/hashicorp/null/versions"


@pytest.mark.parametrize(
    ("routes", "overrides", "message"),
    [
        ({"discovery": httpx.Response(200, text="<html>hi</html>")}, {}, "text/plain"),
        (
            {"discovery": httpx.Response(200, html="<html>hi</html>")},
            {},
            "text/html instead of application/json",
        ),
        ({"discovery": httpx.Response(200, json={"modules.v1": "/m/"})}, {}, "no providers.v1"),
        (
            {"discovery": httpx.Response(200, json={"providers.v1": "http://plain/v1/"})},
            {},
            "non-https",
        ),
        ({"download": httpx.Response(500)}, {}, "HTTP 500"),
        ({}, {"download_url": "http://cdn.example/x.zip"}, "non-https"),
        ({}, {"download_url": "https://169.254.169.254/latest/x.zip"}, "address 169.254"),
        ({}, {"shasum": "nothex"}, "64 hex"),
        ({}, {"arch": "arm64"}, "do not match"),
        ({}, {"filename": "../../etc/passwd"}, "unsafe filename"),
        ({}, {"signing_keys": {"gpg_public_keys": []}}, "no signing_keys"),
        ({}, {"shasums_url": None}, "missing 'shasums_url'"),
        (
            {
                "download": httpx.Response(
                    200, content=b"{", headers={"content-type": "application/json"}
                )
            },
            {},
            "malformed JSON",
        ),
        (
            {
                "download": httpx.Response(
                    200, headers={"content-type": "application/json", "content-length": str(10**8)}
                )
            },
            {},
            "over the 4194304 byte limit",
        ),
    ],
)
def test_bad_answers_are_refused_with_a_reason(
    tmp_path: Path, routes: dict[str, httpx.Response], overrides: dict[str, Any], message: str
) -> None:
    upstream = client(registry(overrides, **routes), tmp_path)
    with pytest.raises(UpstreamError, match=message.replace("(", r"\(")):
        run(upstream, lambda: upstream.download(NULL, "2.1.2", "linux_amd64"))


def test_redirect_to_plain_http_is_refused(tmp_path: Path) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/terraform.json":
            return httpx.Response(302, headers={"location": "http://registry.terraform.io/x"})
        return registry()(request)

    upstream = client(handle, tmp_path)
    with pytest.raises(UpstreamError, match="non-https"):
        run(upstream, lambda: upstream.versions(NULL))


def test_malformed_versions_are_skipped_not_fatal(tmp_path: Path) -> None:
    listing = {
        "versions": [
            {
                "version": "2.1.2",
                "protocols": ["5.0"],
                "platforms": [{"os": "linux", "arch": "amd64"}],
            },
            {"version": "v3.0.0"},
            {"version": "latest"},
            "junk",
            {"version": "3.1.0", "platforms": [{"os": "Linux!", "arch": "x"}]},
        ]
    }
    upstream = client(registry(versions=httpx.Response(200, json=listing)), tmp_path)
    found = run(upstream, lambda: upstream.versions(NULL))
    assert [(v.version, v.platforms) for v in found] == [("2.1.2", ("linux_amd64",)), ("3.1.0", ())]


def test_upstream_404_is_not_found(tmp_path: Path) -> None:
    upstream = client(registry(versions=httpx.Response(404, json={"errors": ["no"]})), tmp_path)
    with pytest.raises(UpstreamNotFound):
        run(upstream, lambda: upstream.versions(NULL))


def test_outbound_tls_trusts_ssl_cert_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tls = ensure_local_tls(tmp_path / "tls", ["127.0.0.1"])
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_cert))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    subjects = [json.dumps(c["subject"]) for c in outbound_ssl_context().get_ca_certs()]
    assert len(subjects) == 1 and "gitreg" in subjects[0].lower()
    monkeypatch.delenv("SSL_CERT_FILE")
    assert len(outbound_ssl_context().get_ca_certs()) > 50  # the public bundle


@pytest.mark.parametrize(
    "entry",
    ["registry.terraform.io", "x=https://", "x=ftp://h", "Bad_Host=https://h", "x=https://h/?q=1"],
)
def test_upstream_entries_are_validated(entry: str) -> None:
    with pytest.raises(BadRequest):
        parse_upstream(entry)


def test_config_file_table_and_lists(tmp_path: Path) -> None:
    (tmp_path / "gitreg.toml").write_text(
        'mirror_platforms = ["linux_amd64", "darwin_arm64"]\n'
        'upstream = "registry.example.org=https://10.0.0.5:8443"\n'
        "[upstreams]\n"
        '"registry.terraform.io" = "https://artifactory.corp/api/terraform/"\n'
    )
    options = mirror_options(load_settings({"data_dir": tmp_path}, environ={}))
    assert options.platforms == ("linux_amd64", "darwin_arm64")
    assert dict(options.upstreams) == {
        "registry.terraform.io": "https://artifactory.corp/api/terraform",
        "registry.example.org": "https://10.0.0.5:8443",
    }
