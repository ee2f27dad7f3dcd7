"""The module proxy's requests share the provider mirror's client
(gitreg/upstream/client.py): a truncated body is refused, and every request
counts in the upstream metrics, against the real fake registry over TLS."""

from __future__ import annotations

import asyncio
import io
import tarfile

import pytest
from prometheus_client import generate_latest

from gitreg.addresses import module_address
from gitreg.errors import UpstreamError
from gitreg.metrics import service as metrics
from gitreg.module_proxy.service import ModuleProxyService
from tests.metrics.scrape import Samples, parse, value
from tests.module_proxy.conftest import MODULE, Upstream

ADDRESS = module_address(*MODULE)


def _samples() -> Samples:
    return parse(generate_latest(metrics.registry()).decode())


def _moved(before: Samples, name: str, **labels: str) -> float:
    return value(_samples(), name, **labels) - value(before, name, **labels)


def _archive(upstream: Upstream, name: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = b'output "x" {\n  value = 1\n}\n' + b"#" * 20_000
        info = tarfile.TarInfo("main.tf")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    body = out.getvalue()
    upstream.registry.files[name] = body
    upstream.registry.modules[MODULE]["3.0.0"] = f"{upstream.registry_url}/files/{name}"
    return body


def test_a_truncated_archive_is_refused_and_counted(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    metrics.enable(per_module=False)  # as create_app does
    _archive(upstream, "cut.tar.gz")
    upstream.registry.truncated.add("cut.tar.gz")
    before = _samples()
    with pytest.raises(UpstreamError, match="truncated") as caught:
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert caught.value.status == 502
    assert service.cached_versions() == []
    assert _moved(before, "gitreg_upstream_errors_total") == 1


def test_registry_failures_count_by_kind(service: ModuleProxyService, upstream: Upstream) -> None:
    metrics.enable(per_module=False)
    before = _samples()
    upstream.registry.down = True  # every answer is a 503
    with pytest.raises(UpstreamError, match="answered HTTP 503"):
        asyncio.run(service.versions(ADDRESS))
    assert _moved(before, "gitreg_upstream_errors_total", kind="status") == 1


def test_archive_bytes_count_as_upstream_bytes(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    metrics.enable(per_module=False)
    body = _archive(upstream, "ok.tar.gz")
    before = _samples()
    record = asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert record.version == "3.0.0"
    assert _moved(before, "gitreg_mirror_upstream_bytes_total") >= len(body)
