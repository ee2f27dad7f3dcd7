"""The local GitHub Actions, GitLab and Kubernetes issuers (tests/support/workload_issuer.py),
one server for the module, and the `[[workload_identity]]` tables that trust them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.workload_issuer import WorkloadIssuers

AUDIENCE = "https://registry.example.com"


@pytest.fixture(scope="module")
def issuers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkloadIssuers]:
    running = WorkloadIssuers(tmp_path_factory.mktemp("issuers") / "tls").start()
    yield running
    running.stop()


def workload_config(issuers: WorkloadIssuers, extra: str = "") -> str:
    """GitHub: acme/infra-live reads acme, acme/provider-ourcloud reads acme and
    publishes there from tags; GitLab: acme/infra-live publishes acme (from a
    protected ref); Kubernetes: the ci/terraform service account reads acme."""
    ca = issuers.ca_file
    return f"""
[[workload_identity]]
issuer = "{issuers["github"].url}"
audience = "{AUDIENCE}"
ca_file = "{ca}"

[[workload_identity.rules]]
claims = {{ repository = "acme/infra-live" }}
namespace = "acme"
scope = "read"

[[workload_identity.rules]]
claims = {{ repository = "acme/provider-ourcloud", ref = "refs/tags/*" }}
namespace = "acme"
scope = "publish"

[[workload_identity.rules]]
claims = {{ repository = "acme/provider-ourcloud" }}
namespace = "acme"
scope = "read"

[[workload_identity]]
issuer = "{issuers["gitlab"].url}"
audience = "{AUDIENCE}"
ca_file = "{ca}"

[[workload_identity.rules]]
claims = {{ project_path = "acme/infra-live" }}
namespace = "acme"
scope = "publish"

[[workload_identity]]
issuer = "{issuers["kubernetes"].url}"
audience = "{AUDIENCE}"
ca_file = "{ca}"

[[workload_identity.rules]]
claims = {{ sub = "system:serviceaccount:ci:*", "kubernetes.io/serviceaccount/name" = "terraform" }}
namespace = "acme"
scope = "read"
{extra}"""


def write_config(data_dir: Path, text: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "gitreg.toml").write_text(text)
