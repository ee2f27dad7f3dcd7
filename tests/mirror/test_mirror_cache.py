"""The pull-through cache against a misbehaving upstream served over real TLS.

Refusals store nothing; single flight, timeouts, caps, https only;
stale-if-error; hashes, and no replacement.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import hashlib
import io
import logging
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gitreg.addresses import provider_address
from gitreg.errors import ConfigError, NotFound, UpstreamError, UpstreamTimeout
from gitreg.mirror.service import MirrorService
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.fake_upstream import FakeUpstream, ServedUpstream, serve_tls
from tests.support.provider_dist import count_zip_entries_read, key_id, zip_of_directories

NULL = provider_address("registry.terraform.io", "hashicorp", "null")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedUpstream]:
    fake = FakeUpstream()
    fake.add("hashicorp", "null", ["1.0.0", "2.1.2"], platforms=("linux_amd64", "darwin_arm64"))
    with serve_tls(fake, tmp_path_factory.mktemp("upstream-tls")) as running:
        yield running


@pytest.fixture
def upstream(served: ServedUpstream, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstream]:
    # The mirror trusts the fake's CA only through SSL_CERT_FILE, as in production.
    monkeypatch.setenv("SSL_CERT_FILE", str(served.ca_pem))
    served.upstream.faults.clear()
    served.upstream.requests.clear()
    served.upstream.slow_seconds = 0.0
    yield served.upstream
    served.upstream.faults.clear()
    served.upstream.slow_seconds = 0.0


MakeMirror = Callable[..., Services]


@pytest.fixture
def make_mirror(
    tmp_path: Path, served: ServedUpstream, upstream: FakeUpstream
) -> Iterator[MakeMirror]:
    built: list[Services] = []

    def make(**flags: Any) -> Services:
        defaults: dict[str, Any] = {
            "data_dir": tmp_path / f"data{len(built)}",
            "upstream": f"registry.terraform.io={served.url}",
            "mirror_platforms": "linux_amd64,darwin_arm64",
        }
        svc = build_services(load_settings({**defaults, **flags}, environ={}))
        built.append(svc)
        return svc

    yield make
    for svc in built:
        svc.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def blob_files(svc: Services) -> list[Path]:
    return [p for p in (svc.settings.blob_dir / "sha256").rglob("*") if p.is_file()]


def expected_h1(data: bytes) -> str:
    lines = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in sorted(archive.namelist()):
            lines.append(f"{hashlib.sha256(archive.read(name)).hexdigest()}  {name}\n")
    return "h1:" + base64.b64encode(hashlib.sha256("".join(lines).encode()).digest()).decode()


async def version_json(mirror: MirrorService, version: str) -> dict[str, Any]:
    import json

    try:
        return dict(json.loads(await mirror.version_json(NULL, version)))
    finally:
        await mirror.settled()  # the fills a cold answer started
        await mirror.aclose()


async def fill(mirror: MirrorService, version: str, platform: str = "linux_amd64") -> None:
    try:
        await mirror.ensure_package(NULL, version, platform)
    finally:
        await mirror.aclose()


def test_cold_miss_fetches_verifies_and_keeps_both_hashes(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror()
    cold = run(version_json(svc.mirror, "2.1.2"))
    body = run(version_json(svc.mirror, "2.1.2"))
    release = upstream.providers[("hashicorp", "null")]["2.1.2"]
    assert set(cold["archives"]) == set(body["archives"]) == {"linux_amd64", "darwin_arm64"}
    for platform, archive in body["archives"].items():
        data = release.zips[platform]
        zh = "zh:" + hashlib.sha256(data).hexdigest()
        # Cold: the signed SHA256SUMS' sha256 only, before the zip is here; warm: h1: too.
        assert cold["archives"][platform] == {"url": archive["url"], "hashes": [zh]}
        assert archive["url"] == f"terraform-provider-null_2.1.2_{platform}.zip"
        assert archive["hashes"] == [expected_h1(data), zh]
        with svc.blobs.open(hashlib.sha256(data).hexdigest()) as blob:
            assert blob.read() == data
    stored = svc.mirror.cached_packages(NULL, "2.1.2")
    assert {p.platform for p in stored} == {"linux_amd64", "darwin_arm64"}
    assert all(p.key_id == key_id(upstream.key) for p in stored)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("sha-mismatch", "but the signed SHA256SUMS says"),
        ("bad-signature", "signature does not verify"),
        ("html", "not a zip archive (upstream sent text/html"),
        ("error500", "answered HTTP 500"),
        ("truncated", "truncated"),
        ("bad-crc", "Bad CRC-32"),
        # The zip downloads while the signature is checked: a bad signature is the
        # reason given, however the zip fares.
        ("bad-signature+error500", "signature does not verify"),
        ("bad-signature+truncated", "signature does not verify"),
    ],
)
def test_refused_packages_are_never_stored(
    make_mirror: MakeMirror, upstream: FakeUpstream, fault: str, reason: str
) -> None:
    svc = make_mirror()
    upstream.faults["2.1.2"] = fault
    with pytest.raises(UpstreamError, match=re.escape(reason)) as caught:
        run(fill(svc.mirror, "2.1.2"))
    assert caught.value.status == 502
    assert svc.mirror.cached_packages(NULL) == []
    assert blob_files(svc) == []
    assert list((svc.settings.blob_dir / "tmp").iterdir()) == []


def test_concurrent_misses_share_one_fetch(make_mirror: MakeMirror, upstream: FakeUpstream) -> None:
    svc = make_mirror(mirror_platforms="linux_amd64")

    async def many() -> list[bytes]:
        try:
            return list(
                await asyncio.gather(*(svc.mirror.version_json(NULL, "1.0.0") for _ in range(20)))
            )
        finally:
            await svc.mirror.settled()
            await svc.mirror.aclose()

    bodies = run(many())
    assert len(set(bodies)) == 1
    assert (
        upstream.count("/files/hashicorp/null/1.0.0/terraform-provider-null_1.0.0_linux_amd64.zip")
        == 1
    )
    assert upstream.count("/download/linux/amd64") == 1
    assert upstream.count("/versions") == 1


def test_index_is_served_stale_while_upstream_fails(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror(mirror_index_ttl=0)
    mirror = svc.mirror

    async def scenario() -> tuple[bytes, bytes, bytes]:
        try:
            first = await mirror.index_json(NULL)
            await mirror.version_json(NULL, "1.0.0")
            upstream.faults["*"] = "down"
            mirror._fresh.clear()  # the ttl is 0 anyway: every request asks upstream
            stale = await mirror.index_json(NULL)
            cached_version = await mirror.version_json(NULL, "1.0.0")
            with pytest.raises(UpstreamError, match="503") as caught:
                await mirror.version_json(NULL, "2.1.2")
            assert caught.value.status == 502
            return first, stale, cached_version
        finally:
            await mirror.aclose()

    first, stale, cached_version = run(scenario())
    assert stale == first
    assert b"1.0.0" in stale and b"2.1.2" in stale
    assert b"terraform-provider-null_1.0.0_linux_amd64.zip" in cached_version


def test_stale_index_expires_after_the_window(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror(mirror_index_ttl=0, mirror_stale_if_error=0)

    async def scenario() -> None:
        try:
            await svc.mirror.index_json(NULL)
            upstream.faults["*"] = "down"
            with pytest.raises(UpstreamError, match="503"):
                await svc.mirror.index_json(NULL)
        finally:
            await svc.mirror.aclose()

    run(scenario())


def test_slow_upstream_is_a_504(make_mirror: MakeMirror, upstream: FakeUpstream) -> None:
    svc = make_mirror(mirror_read_timeout=0.3)
    upstream.slow_seconds = 2.0

    async def scenario() -> None:
        try:
            await svc.mirror.index_json(NULL)
        finally:
            await svc.mirror.aclose()

    with pytest.raises(UpstreamTimeout) as caught:
        run(scenario())
    assert caught.value.status == 504


def test_total_deadline_covers_the_whole_request(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror(mirror_total_timeout=0.3)
    upstream.slow_seconds = 2.0
    with pytest.raises(UpstreamTimeout, match="did not answer completely"):
        run(version_json(svc.mirror, "1.0.0"))


def test_package_over_the_size_cap_is_refused(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror(max_provider_package_bytes=100)
    with pytest.raises(UpstreamError, match="over the 100 byte limit"):
        run(version_json(svc.mirror, "1.0.0"))
    assert blob_files(svc) == []


def test_unknown_provider_upstream_is_not_found(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror()
    missing = provider_address("registry.terraform.io", "hashicorp", "nope")

    async def scenario() -> None:
        try:
            await svc.mirror.index_json(missing)
        finally:
            await svc.mirror.aclose()

    with pytest.raises(NotFound, match="not found upstream"):
        run(scenario())


def test_hostnames_outside_the_allow_list_are_never_fetched(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror()
    elsewhere = provider_address("169.254.169.254", "latest", "meta-data")
    with pytest.raises(NotFound, match="not mirrored here"):
        run(svc.mirror.index_json(elsewhere))
    assert upstream.requests == []


def test_cached_package_is_never_replaced(make_mirror: MakeMirror, upstream: FakeUpstream) -> None:
    svc = make_mirror(mirror_platforms="linux_amd64", mirror_index_ttl=0)
    run(version_json(svc.mirror, "1.0.0"))  # cold: fetches and stores it
    before = run(version_json(svc.mirror, "1.0.0"))
    original = dict(upstream.providers[("hashicorp", "null")])
    try:
        upstream.add("hashicorp", "null", ["1.0.0"], binary=b"other bytes")
        after = run(version_json(svc.mirror, "1.0.0"))
    finally:
        upstream.providers[("hashicorp", "null")] = original
    assert after == before


@pytest.mark.parametrize(
    "upstream",
    ["registry.terraform.io=http://127.0.0.1:1", "registry.terraform.io", "bad host=https://x"],
)
def test_upstream_mapping_must_be_https(tmp_path: Path, upstream: str) -> None:
    settings = load_settings({"data_dir": tmp_path, "upstream": upstream}, environ={})
    with pytest.raises(ConfigError):
        build_services(settings)


def test_requests_to_one_upstream_are_bounded(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror(mirror_concurrency=1)

    async def scenario() -> None:
        try:
            await svc.mirror.index_json(NULL)
            while upstream.in_flight:  # slow requests of earlier tests still sleeping
                await asyncio.sleep(0.05)
            upstream.slow_seconds = 0.2
            upstream.max_in_flight = 0
            await svc.mirror.version_json(NULL, "2.1.2")  # two platforms, fetched together
            await svc.mirror.settled()
        finally:
            await svc.mirror.aclose()

    run(scenario())
    assert upstream.max_in_flight == 1
    assert len(svc.mirror.cached_packages(NULL, "2.1.2")) == 2


def test_made_up_archive_names_cost_no_upstream_request(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    svc = make_mirror()

    async def scenario() -> None:
        try:
            await svc.mirror.index_json(NULL)
            for name in (
                "terraform-provider-null_9.9.9_linux_amd64.zip",
                "terraform-provider-null_2.1.2_plan9_mips.zip",
                "terraform-provider-null_2.1.2_linux_amd64?x=1.zip",
            ):
                with pytest.raises(NotFound):
                    await svc.mirror.archive_sha256(NULL, name)
        finally:
            await svc.mirror.aclose()

    run(scenario())
    assert upstream.count("/download/") == 0


def test_a_cold_answers_fill_that_fails_later_leaves_no_unretrieved_error(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    """A cold VERSION.json answers once the zip is arriving; a fill that fails after
    that (a tampered zip here), with no reader awaiting it, must not end as asyncio's
    "Task exception was never retrieved" (a traceback in the server's log)."""
    svc = make_mirror(mirror_platforms="linux_amd64")
    upstream.faults["2.1.2"] = "tampered"
    reported: list[dict[str, Any]] = []

    async def go() -> dict[str, Any]:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        body = await version_json(svc.mirror, "2.1.2")
        with pytest.raises(UpstreamError, match="signed SHA256SUMS says"):
            await svc.mirror.ensure_package(NULL, "2.1.2", "linux_amd64")  # remembered
        svc.mirror._failed.clear()  # as when it is retried later: the failed task is freed
        gc.collect()  # an unretrieved task error is reported when the task is freed
        return body

    cold = run(go())
    assert list(cold["archives"]) == ["linux_amd64"]
    assert [ctx.get("message") for ctx in reported] == []
    assert svc.mirror.cached_packages(NULL) == []


def test_a_failed_fill_removes_its_temp_file_off_the_event_loop(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    """Closing and removing a refused zip's temp file (up to the package cap) is
    file work: a worker thread's, as the successful fill's fsync and rename are."""
    svc = make_mirror(mirror_platforms="linux_amd64")
    upstream.faults["2.1.2"] = "truncated"  # the download itself fails
    blobs, exits = svc.mirror.fetcher.blobs, []

    @contextlib.contextmanager
    def writer(check: Any = None) -> Iterator[Any]:
        try:
            with blobs.writer(check) as sink:
                yield sink
        finally:
            exits.append(threading.current_thread())

    svc.mirror.fetcher.blobs = SimpleNamespace(writer=writer)
    with pytest.raises(UpstreamError):
        run(fill(svc.mirror, "2.1.2"))
    assert exits and threading.main_thread() not in exits
    assert list((svc.settings.blob_dir / "tmp").iterdir()) == []


def test_a_fill_stopped_mid_download_leaves_no_temp_file(
    make_mirror: MakeMirror, upstream: FakeUpstream
) -> None:
    """The server stopping cancels a fill while its zip arrives: the temp file goes."""
    svc = make_mirror(mirror_platforms="linux_amd64")
    upstream.gate = threading.Event()  # the zip stops at its middle

    async def go() -> None:
        try:
            fill = await svc.mirror.archive(NULL, "terraform-provider-null_2.1.2_linux_amd64.zip")
            assert not isinstance(fill, str)
            await fill.ready()
            assert fill.task is not None
            fill.task.cancel()
            await asyncio.wait([fill.task])
        finally:
            upstream.gate = None
            await svc.mirror.aclose()

    run(go())
    assert svc.mirror.cached_packages(NULL) == []
    assert list((svc.settings.blob_dir / "tmp").iterdir()) == []


def mirror_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "gitreg.mirror" and r.levelno >= logging.WARNING
    ]


def test_a_sync_fill_that_fails_is_left_to_its_command_to_report(
    make_mirror: MakeMirror, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """`gitreg mirror sync` prints every package that failed (FAIL ...): its fill,
    which no client can join, is not logged a second time by the service."""
    svc = make_mirror(mirror_platforms="linux_amd64")
    upstream.faults["2.1.2"] = "tampered"
    caplog.set_level(logging.WARNING, "gitreg.mirror")

    async def sync() -> None:
        try:
            await svc.mirror.ensure_package(NULL, "2.1.2", "linux_amd64", lambda *_: None)
        finally:
            await svc.mirror.aclose()

    with pytest.raises(UpstreamError, match="signed SHA256SUMS says"):
        run(sync())
    assert mirror_warnings(caplog) == []


def test_a_cold_version_json_failing_before_its_zip_arrives_is_logged_once(
    make_mirror: MakeMirror, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """A failure before the zip arrives (a bad signature) is the cold VERSION.json's
    to report, as its answer is that error: one line, not a second from the fill."""
    svc = make_mirror(mirror_platforms="linux_amd64")
    upstream.faults["2.1.2"] = "bad-signature"
    caplog.set_level(logging.WARNING, "gitreg.mirror")
    with pytest.raises(UpstreamError, match="signature does not verify"):
        run(version_json(svc.mirror, "2.1.2"))
    warned = mirror_warnings(caplog)
    assert len(warned) == 1, warned
    assert "hashicorp/null 2.1.2 linux_amd64" in warned[0]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("tampered", "signed SHA256SUMS says"), ("truncated", "broke off")],
)
def test_a_cold_version_json_whose_zip_fails_is_logged_once(
    make_mirror: MakeMirror,
    upstream: FakeUpstream,
    caplog: pytest.LogCaptureFixture,
    fault: str,
    reason: str,
) -> None:
    """Once its answer went out, no client read the zip: the service logs the
    refusal, once (tests/mirror/test_mirror_stream.py has the same against a real
    server, and with a reader attached). A body cut before the signature verified
    fails the answer itself instead, which logs it: one line either way."""
    svc = make_mirror(mirror_platforms="linux_amd64")
    upstream.faults["2.1.2"] = fault
    caplog.set_level(logging.WARNING, "gitreg.mirror")
    with contextlib.suppress(UpstreamError):
        assert list(run(version_json(svc.mirror, "2.1.2"))["archives"]) == ["linux_amd64"]
    warned = mirror_warnings(caplog)
    assert len(warned) == 1, warned
    assert "hashicorp/null 2.1.2 linux_amd64" in warned[0]
    assert reason in warned[0]


def test_a_zip_with_more_entries_than_the_limit_is_refused(
    make_mirror: MakeMirror,
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Directory entries count like files, before zipfile reads the central directory."""
    svc = make_mirror(mirror_platforms="linux_amd64", max_provider_files=5)
    address = provider_address("registry.terraform.io", "hashicorp", "entries")
    upstream.add("hashicorp", "entries", ["1.0.0"])
    release = upstream.providers[("hashicorp", "entries")]["1.0.0"]
    release.zips["linux_amd64"] = zip_of_directories("entries", "1.0.0", 200)
    read = count_zip_entries_read(monkeypatch)
    caplog.set_level(logging.INFO, "gitreg")

    async def go() -> None:
        try:
            await svc.mirror.ensure_package(address, "1.0.0", "linux_amd64")
        finally:
            await svc.mirror._upstream.aclose()

    try:
        with pytest.raises(UpstreamError, match="more than 5 entries"):
            run(go())
    finally:
        del upstream.providers[("hashicorp", "entries")]
    assert read == []
    assert svc.mirror._store.packages(address.key) == []
    assert blob_files(svc) == []
    assert not [r for r in caplog.records if "d1/" in r.getMessage()]
