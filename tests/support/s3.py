"""A real S3 endpoint for tests: moto's server mode, in this process, on 127.0.0.1.

No S3-compatible server can be installed from the package registries here, so
moto's (`ThreadedMotoServer`) stands in: gitreg talks to it over HTTP through
its real client, exactly as to AWS or MinIO. The `s3` fixture gives each test
its own bucket and the standard AWS_* variables (all gitreg reads) pointing at
it; `moto_s3()` starts a server a test may stop and start again (an outage).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from moto.server import ThreadedMotoServer

from tests.support.server import free_port

# moto logs every request through werkzeug; test output should show failures.
logging.getLogger("werkzeug").setLevel(logging.ERROR)


@dataclass
class MotoS3:
    port: int
    server: ThreadedMotoServer
    running: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        # Objects live in moto's in-process backend, so they survive a restart.
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.server.stop()
            self.running = False

    def create_bucket(self, name: str) -> None:
        # moto accepts any credentials; a bare PUT creates a bucket.
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()

    def env(self) -> dict[str, str]:
        """The standard AWS variables, all gitreg reads for S3."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }


def moto_s3() -> MotoS3:
    """A started moto S3 server on a free port; stop it when done."""
    port = free_port()
    moto = MotoS3(port, ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False))
    moto.start()
    return moto


@dataclass(frozen=True)
class S3Bucket:
    moto: MotoS3
    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        """The `blob_store` setting for this bucket and prefix."""
        return f"s3://{self.bucket}/{self.prefix}"

    def env(self) -> dict[str, str]:
        """What a `gitreg serve` needs to use this bucket (path-style: moto is an IP)."""
        return {
            **self.moto.env(),
            "GITREG_BLOB_STORE": self.url,
            "GITREG_S3_ADDRESSING": "path",
        }


@pytest.fixture(scope="session")
def shared_moto() -> Iterator[MotoS3]:
    moto = moto_s3()
    yield moto
    moto.stop()


def new_bucket(moto: MotoS3, monkeypatch: pytest.MonkeyPatch) -> S3Bucket:
    """A fresh bucket on `moto`, with the AWS_* variables set for this test."""
    bucket = S3Bucket(moto, f"gitreg-{uuid.uuid4().hex[:12]}", "registry/one")
    moto.create_bucket(bucket.bucket)
    for name, value in moto.env().items():
        monkeypatch.setenv(name, value)
    return bucket


@pytest.fixture
def s3(shared_moto: MotoS3, monkeypatch: pytest.MonkeyPatch) -> S3Bucket:
    return new_bucket(shared_moto, monkeypatch)


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 in front of an S3 endpoint, whose `cut()` drops
    every open connection and refuses new ones: S3 failing in the middle of a body."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.cut_event = threading.Event()
        self.sockets: list[socket.socket] = []
        self._budget: int | None = None  # response bytes still passed before a cut
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_after(self, response_bytes: int) -> None:
        """Cut once `response_bytes` more bytes came back from the endpoint (cut
        here, not when a reader notices: loopback buffers hold tens of MiB)."""
        with self._lock:
            self._budget = response_bytes

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.cut_event.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut_event.is_set():
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [client, upstream]
            for source, sink, counted in ((client, upstream, False), (upstream, client, True)):
                pipe = threading.Thread(target=self._pipe, args=(source, sink, counted))
                pipe.daemon = True
                pipe.start()

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if counted and self._spend(len(data)):
                    self.cut()
                    return
                sink.sendall(data)  # blocks while the reader is slow: backpressure
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _spend(self, count: int) -> bool:
        with self._lock:
            if self._budget is None:
                return False
            self._budget -= count
            return self._budget < 0

    def cut(self) -> None:
        self.cut_event.set()
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def client_panic(message: str) -> BaseException:
    """What the S3 client raises when its Rust code panics: pyo3's
    `PanicException`, a BaseException whose class cannot be imported by name
    (pyo3 registers it when the client's module loads; every extension built
    with pyo3 has a class of that name of its own)."""
    import obstore  # noqa: F401  (loads the class)

    panic = next(
        kind
        for kind in BaseException.__subclasses__()
        if kind.__module__ == "pyo3_runtime" and kind.__name__ == "PanicException"
    )
    return panic(message)
