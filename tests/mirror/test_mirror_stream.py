"""A cold miss of a mirror zip is sent while it arrives (gitreg/mirror/fill.py),
against a real `gitreg serve` over TLS pulling through a fake upstream over TLS
whose zip bodies can be held at their middle (`gate`)."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fake_upstream import FakeUpstream, serve_tls
from tests.support.server import RunningServer, start_server

BASE = "/mirror/registry.terraform.io/hashicorp/big"
VERSIONS = [f"1.0.{i}" for i in range(11)]
NOISE = 1_500_000  # incompressible bytes per zip: many 64 KiB pieces before the gate


@dataclass
class World:
    server: RunningServer
    upstream: FakeUpstream


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("stream")
    fake = FakeUpstream()
    fake.add("hashicorp", "big", VERSIONS, noise=NOISE)
    with serve_tls(fake, root / "upstream-tls") as served:
        env = {
            "SSL_CERT_FILE": str(served.ca_pem),
            "GITREG_UPSTREAM": f"registry.terraform.io={served.url}",
            "GITREG_MIRROR_PLATFORMS": "linux_amd64",
            "GITREG_JOB_WORKERS": "0",
        }
        server = start_server(root / "data", env=env)
        try:
            yield World(server, fake)
        finally:
            server.stop()


@pytest.fixture
def upstream(world: World) -> Iterator[FakeUpstream]:
    fake = world.upstream
    fake.gate = threading.Event()  # closed: zips stop at their middle until opened
    fake.requests.clear()
    yield fake
    if fake.gate is not None:
        fake.gate.set()
    fake.gate = None
    fake.faults.clear()


def zip_path(version: str) -> str:
    return f"{BASE}/terraform-provider-big_{version}_linux_amd64.zip"


def genuine(upstream: FakeUpstream, version: str) -> bytes:
    return upstream.providers[("hashicorp", "big")][version].zips["linux_amd64"]


def open_get(
    server: RunningServer, path: str
) -> tuple[http.client.HTTPSConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=server.ssl_context(), timeout=20
    )
    connection.request("GET", path)
    return connection, connection.getresponse()


def stored_blobs(server: RunningServer) -> list[Path]:
    return [p for p in (server.data_dir / "blobs" / "sha256").rglob("*") if p.is_file()]


def temp_files(server: RunningServer) -> list[Path]:
    return list((server.data_dir / "blobs" / "tmp").iterdir())


def wait_until_stored(server: RunningServer, data: bytes) -> None:
    sha256 = hashlib.sha256(data).hexdigest()
    deadline = time.monotonic() + 30
    while not any(p.name == sha256 for p in stored_blobs(server)):
        assert time.monotonic() < deadline, "the fill never stored the zip"
        time.sleep(0.05)


def _read_cut_off(world: World, upstream: FakeUpstream, path: str) -> None:
    """GET a zip held at its middle, let the rest come, and see the connection cut
    short of its Content-Length (the zip failed its verification)."""
    connection, answer = open_get(world.server, path)
    with contextlib.closing(connection):
        assert answer.status == 200
        assert upstream.gate is not None
        upstream.gate.set()
        with pytest.raises(http.client.IncompleteRead):
            answer.read()


def test_cold_zip_arrives_before_the_upstream_finished_sending(
    world: World, upstream: FakeUpstream
) -> None:
    data = genuine(upstream, "1.0.0")
    connection, answer = open_get(world.server, zip_path("1.0.0"))
    with contextlib.closing(connection):
        assert answer.status == 200
        assert int(answer.headers["content-length"]) == len(data)
        assert answer.headers["etag"] == f'"{hashlib.sha256(data).hexdigest()}"'
        # The upstream holds the second half back: the client already has bytes.
        head = answer.read(256 * 1024)
        assert head == data[: len(head)]
        assert not stored_blobs(world.server)
        assert upstream.gate is not None
        upstream.gate.set()
        assert head + answer.read() == data
    assert upstream.count(".zip") == 1
    wait_until_stored(world.server, data)
    assert not temp_files(world.server)


def test_tampered_zip_is_cut_off_before_its_tail_and_never_stored(
    world: World, upstream: FakeUpstream
) -> None:
    """Right length, one wrong byte in the middle: the client gets a truncated
    body (never the whole wrong zip), and nothing is kept."""
    upstream.faults["1.0.1"] = "tampered"
    data = genuine(upstream, "1.0.1")
    before = stored_blobs(world.server)
    connection, answer = open_get(world.server, zip_path("1.0.1"))
    with contextlib.closing(connection):
        assert answer.status == 200
        assert int(answer.headers["content-length"]) == len(data)
        assert upstream.gate is not None
        upstream.gate.set()
        with pytest.raises(http.client.IncompleteRead) as cut:
            answer.read()
    received = cut.value.partial
    assert 0 < len(received) < len(data)
    assert len(data) - len(received) >= 64 * 1024  # at least the held-back tail is missing
    assert stored_blobs(world.server) == before
    assert not temp_files(world.server)
    assert "sha256" in world.server.log()  # the reason is logged


def test_a_cut_off_zip_is_one_warning_line_without_traceback(
    world: World, upstream: FakeUpstream
) -> None:
    """The server's log says which package was cut off and why, once: neither the
    app's "unhandled error" nor uvicorn's "Exception in ASGI application"."""
    upstream.faults["1.0.5"] = "tampered"
    seen = len(world.server.log())
    _read_cut_off(world, upstream, zip_path("1.0.5"))
    lines = [json.loads(line) for line in world.server.log()[seen:].splitlines()]
    cut = [line for line in lines if line["level"] in ("warning", "error", "critical")]
    assert len(cut) == 1, cut
    assert cut[0]["level"] == "warning"
    package = "registry.terraform.io/hashicorp/big/terraform-provider-big_1.0.5_linux_amd64.zip"
    assert package in cut[0]["msg"]
    assert "signed SHA256SUMS says" in cut[0]["msg"]  # the reason
    assert "exc" not in cut[0]
    assert "Traceback" not in world.server.log()[seen:]


def test_a_zip_with_the_signed_sha256_goes_out_whole_and_its_layout_is_checked_after(
    world: World, upstream: FakeUpstream
) -> None:
    """The tail waits for the sha256 only (docs/mirror.md, "Cold VERSION.json"): the
    signed bytes go out whole, and the layout and `h1:` are checked after, off the
    client's path. One that fails them (a member's CRC-32 here, in the bytes the
    signature covers) is still never kept, and the log says why."""
    upstream.faults["1.0.8"] = "bad-crc"
    signed = upstream._zip(upstream.providers[("hashicorp", "big")]["1.0.8"], "linux_amd64")
    assert signed is not None and signed != genuine(upstream, "1.0.8")
    before = stored_blobs(world.server)
    connection, answer = open_get(world.server, zip_path("1.0.8"))
    with contextlib.closing(connection):
        assert answer.status == 200
        assert upstream.gate is not None
        upstream.gate.set()
        assert answer.read() == signed
    deadline = time.monotonic() + 30
    while "sent, but not kept" not in world.server.log():
        assert time.monotonic() < deadline, "the fill never ended"
        time.sleep(0.05)
    assert "Bad CRC-32" in world.server.log()
    assert stored_blobs(world.server) == before
    assert not temp_files(world.server)


def test_requests_during_the_fill_join_it_and_the_upstream_is_asked_once(
    world: World, upstream: FakeUpstream
) -> None:
    """Single-flight: a request arriving while the zip is arriving joins the
    stream (reads the same temp file from its start) instead of waiting for the end."""
    data = genuine(upstream, "1.0.2")
    first = open_get(world.server, zip_path("1.0.2"))
    second = open_get(world.server, zip_path("1.0.2"))
    with contextlib.closing(first[0]), contextlib.closing(second[0]):
        heads = [answer.read(128 * 1024) for _, answer in (first, second)]
        assert heads == [data[: 128 * 1024]] * 2  # both have bytes before the upstream's end
        assert upstream.gate is not None
        upstream.gate.set()
        rest = [answer.read() for _, answer in (first, second)]
        assert [heads[0] + rest[0], heads[1] + rest[1]] == [data, data]
    assert upstream.count("1.0.2_linux_amd64.zip") == 1
    assert upstream.count("1.0.2/SHA256SUMS.sig") == 1


def test_a_client_leaving_mid_stream_does_not_stop_the_fill(
    world: World, upstream: FakeUpstream
) -> None:
    data = genuine(upstream, "1.0.3")
    connection, answer = open_get(world.server, zip_path("1.0.3"))
    assert answer.read(64 * 1024) == data[: 64 * 1024]
    connection.close()  # gone, with the upstream still holding its second half
    assert upstream.gate is not None
    upstream.gate.set()
    wait_until_stored(world.server, data)
    assert not temp_files(world.server)
    connection, answer = open_get(world.server, zip_path("1.0.3"))  # now a warm hit
    with contextlib.closing(connection):
        assert answer.read() == data
    assert upstream.count("1.0.3_linux_amd64.zip") == 1


def peak_rss_kib(server: RunningServer) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


@pytest.mark.slow
def test_a_reader_that_stalls_holds_pieces_not_the_zip(
    tmp_path: Path, world: World, upstream: FakeUpstream
) -> None:
    """Memory stays bounded: the whole 40 MB zip arrives and is
    stored while the client reads nothing; the server's peak RSS grows by far less."""
    upstream.gate = None
    big = "1.0.7"  # listed from the start; its zip replaced by a 40 MB one before any fetch
    upstream.add("hashicorp", "big", [big], noise=40_000_000)
    data = genuine(upstream, big)
    connection, answer = open_get(world.server, zip_path("1.0.6"))  # what a first fill imports
    with contextlib.closing(connection):
        assert answer.read() == genuine(upstream, "1.0.6")
    before = peak_rss_kib(world.server)
    connection, answer = open_get(world.server, zip_path(big))
    with contextlib.closing(connection):
        wait_until_stored(world.server, data)  # while this client read nothing
        grown = peak_rss_kib(world.server) - before
        assert answer.read() == data
    # What the peak grows by is first-use buffers and thread arenas, the same for
    # a 40 MB zip as for an 80 MB one.
    assert grown * 1024 < len(data) / 2, f"peak RSS grew {grown} KiB for a {len(data)} byte zip"


def test_a_bad_signature_is_a_json_error_before_any_byte(
    world: World, upstream: FakeUpstream
) -> None:
    """The status line waits for SHA256SUMS and its signature: their failure is an
    ordinary error answer, not a cut-off body."""
    upstream.faults["1.0.4"] = "bad-signature"
    before = stored_blobs(world.server)
    connection, answer = open_get(world.server, zip_path("1.0.4"))
    with contextlib.closing(connection):
        assert answer.status == 502
        assert answer.headers["content-type"] == "application/json"
        assert "signature" in json.loads(answer.read())["errors"][0]
    assert stored_blobs(world.server) == before
    assert not temp_files(world.server)


def warnings_since(server: RunningServer, seen: int) -> list[dict[str, str]]:
    """Warnings and errors logged since `seen`, but for the HEADs' own: every 5xx
    answer is one error line of its request (gitreg/app.py), the HEAD's included."""
    lines = [json.loads(line) for line in server.log()[seen:].splitlines()]
    return [
        line
        for line in lines
        if line["level"] in ("warning", "error", "critical") and not line["msg"].startswith("HEAD ")
    ]


def cold_version_json(server: RunningServer, version: str) -> None:
    """GET VERSION.json on a miss: answered once the zip is arriving, its fill left
    running (docs/mirror.md, "Cold VERSION.json")."""
    connection, answer = open_get(server, f"{BASE}/{version}.json")
    with contextlib.closing(connection):
        assert answer.status == 200
        assert list(json.loads(answer.read())["archives"]) == ["linux_amd64"]


def head_status(server: RunningServer, path: str) -> int:
    """A HEAD of a zip waits for its fill to end (without reading it), or meets the
    failure the fill left remembered: either way, the fill has ended when it returns.
    A 502 is also logged as this request's error line (left out by `warnings_since`)."""
    connection = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=server.ssl_context(), timeout=20
    )
    with contextlib.closing(connection):
        connection.request("HEAD", path)
        return connection.getresponse().status


def test_a_cold_version_json_whose_zip_is_tampered_logs_one_warning(
    world: World, upstream: FakeUpstream
) -> None:
    """No client reads the zip a cold VERSION.json started: when it turns out not
    to be the signed one, no reader is cut off to say so, and the service logs it,
    once, naming the package and the reason."""
    upstream.faults["1.0.9"] = "tampered"
    seen = len(world.server.log())
    cold_version_json(world.server, "1.0.9")
    assert upstream.gate is not None
    upstream.gate.set()
    assert head_status(world.server, zip_path("1.0.9")) == 502
    warned = warnings_since(world.server, seen)
    assert len(warned) == 1, warned
    assert "registry.terraform.io/hashicorp/big 1.0.9 linux_amd64" in warned[0]["msg"]
    assert "signed SHA256SUMS says" in warned[0]["msg"]  # the reason
    assert not temp_files(world.server)


def test_a_tampered_zip_a_cold_version_json_started_and_a_client_reads_logs_one_line(
    world: World, upstream: FakeUpstream
) -> None:
    """Terraform's own order: VERSION.json (a miss, which starts the fill), then the
    zip, which joins it. The reader cut off reports the failure; the service,
    seeing a reader there, does not report it a second time."""
    upstream.faults["1.0.10"] = "tampered"
    seen = len(world.server.log())
    cold_version_json(world.server, "1.0.10")
    _read_cut_off(world, upstream, zip_path("1.0.10"))
    assert head_status(world.server, zip_path("1.0.10")) == 502
    warned = warnings_since(world.server, seen)
    assert len(warned) == 1, warned
    assert warned[0]["msg"].startswith("cut off ")
    assert "terraform-provider-big_1.0.10_linux_amd64.zip" in warned[0]["msg"]
    assert "signed SHA256SUMS says" in warned[0]["msg"]
