"""End to end: a CI provider upload spread over replicas behind a
load balancer. Two `gitreg serve` replicas with separate data dirs share one
real PostgreSQL server and one S3 bucket (moto's server mode); the upload is
created on replica 1, its files are PUT alternately to both, it is published on
replica 2, and the real Terraform CLI installs the provider through replica 1.
The staging quotas count what either replica staged, and either replica's
cleaner removes an idle upload made on the other.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import obstore
from obstore.store import S3Store

from tests.e2e import test_e2e_replicas
from tests.e2e.test_e2e_replicas import Cluster
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer
from tests.support.terraform import null_provider_binary, run_terraform

# Two replicas, one PostgreSQL database, one bucket: the replicas suite's fixture.
cluster = test_e2e_replicas.cluster

PLATFORMS = ("linux_amd64", "darwin_arm64")
VERSION = "2.2.0"
UPLOADS = f"/api/v1/providers/ciacme/null/{VERSION}/uploads"


def _call(
    server: RunningServer, method: str, path: str, token: str, body: bytes = b""
) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        server.url + path,
        data=body if method != "GET" else None,
        method=method,
        headers={"Authorization": f"Bearer {token}"},
    )
    context: ssl.SSLContext = server.ssl_context()
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        with exc:  # its connection too, or a ResourceWarning surfaces in a later test
            return exc.code, json.loads(exc.read() or b"{}")


def test_an_upload_created_put_and_published_on_different_replicas_installs(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.cli("key", "generate", "ciacme")
    [key] = json.loads(cluster.cli("keys", "ciacme", "--json"))
    token = cluster.cli("token", "create", "--scope", "publish", "--namespace", "ciacme")
    token = token.split()[-1]
    dist = make_dist("null", VERSION, PLATFORMS, null_provider_binary().read_bytes())
    del dist.files[dist.shasums_name]  # gitreg writes and signs SHA256SUMS ({"sign": true})
    first = cluster.start(1)
    second = cluster.start(2)

    status, created = _call(first, "POST", UPLOADS, token)
    assert status == 201, created
    upload = f"{UPLOADS}/{created['upload_id']}"
    for n, (name, data) in enumerate(sorted(dist.files.items())):
        replica = (first, second)[n % 2]
        status, answer = _call(replica, "PUT", f"{upload}/{name}", token, data)
        assert (status, answer) == (201, {"filename": name, "size": len(data)})
    status, published = _call(second, "POST", f"{upload}/publish", token, b'{"sign": true}')
    assert status == 201, published
    # The upload is gone from the shared store: publishing it again, anywhere, is a 404.
    assert _call(first, "POST", f"{upload}/publish", token)[0] == 404
    # Nothing of it was staged in a replica's data dir.
    for number in (1, 2):
        assert not (cluster.data_dir(number) / "uploads").exists()

    status, listed = _call(first, "GET", "/v1/providers/ciacme/null/versions", token)
    assert status == 200
    versions = listed["versions"]
    assert isinstance(versions, list)
    assert [(v["version"], len(v["platforms"])) for v in versions] == [(VERSION, 2)]
    workdir = tmp_path / "tf"
    workdir.mkdir()
    source = f"{first.host}/ciacme/null"
    (workdir / "main.tf").write_text(
        "terraform {\n  required_providers {\n"
        f'    null = {{\n      source  = "{source}"\n      version = "{VERSION}"\n    }}\n'
        "  }\n}\n"
    )
    init = run_terraform(workdir, "init", "-input=false", ca_pem=first.ca_pem)
    assert f"Installed {source} v{VERSION} (self-signed, key ID {key['key_id']})" in init.stdout


def _staged_keys(cluster: Cluster) -> list[str]:
    """The bucket's staged upload objects, read around gitreg."""
    env = cluster.env
    raw = S3Store(
        env["GITREG_BLOB_STORE"].removeprefix("s3://").split("/", 1)[0],
        config={
            "endpoint": env["AWS_ENDPOINT_URL"],
            "access_key_id": env["AWS_ACCESS_KEY_ID"],
            "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "region": env["AWS_REGION"],
        },
        client_options={"allow_http": True},
    )
    return [m["path"] for batch in obstore.list(raw, "registry/uploads/") for m in batch]


def test_quotas_and_expiry_hold_across_replicas(cluster: Cluster) -> None:
    token = cluster.cli("token", "create", "--scope", "publish", "--namespace", "ciacme")
    token = token.split()[-1]
    limits = {"GITREG_MAX_STAGED_BYTES_PER_TOKEN": str(100 * 1024)}
    first = cluster.start(1, limits)
    # The second replica's cleaner expires uploads idle for 2 s.
    second = cluster.start(2, {**limits, "GITREG_STAGING_TTL": "2"})
    zip_name = f"terraform-provider-null_{VERSION}_linux_amd64.zip"
    status, created = _call(first, "POST", UPLOADS, token)
    assert status == 201, created
    upload = f"{UPLOADS}/{created['upload_id']}"
    assert _call(first, "PUT", f"{upload}/{zip_name}", token, b"z" * 64 * 1024)[0] == 201
    # The token's 64 KiB staged through replica 1 count on replica 2.
    other = f"{upload}/terraform-provider-null_{VERSION}_darwin_arm64.zip"
    status, refused = _call(second, "PUT", other, token, b"z" * 64 * 1024)
    assert status == 413 and "max_staged_bytes_per_token" in str(refused["errors"])
    # Replica 2's cleaner removes the idle upload replica 1 made; replica 1 then knows
    # it no more.
    deadline = time.monotonic() + 30
    while _staged_keys(cluster):
        assert time.monotonic() < deadline, second.log()[-3000:]
        time.sleep(0.2)
    assert _call(first, "PUT", other, token, b"z")[0] == 404
