"""The client's parts on their own: Terraform's credential sources in their
order, reading modules.json sources, the dirHash of a tree with symlinks (the
same from the archive and from the extracted directory), and the lock file."""

from __future__ import annotations

import base64
import io
import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from gitreg.archives.dirhash import archive_dirhash, tree_dirhash
from gitreg.errors import BadRequest
from gitreg.verify.credentials import token_for
from gitreg.verify.lockfile import Locked, LockedCheckpoint, LockFile, read_lock, write_lock
from gitreg.verify.manifest import Installed, read_manifest, registry_module
from gitreg.verify.registry import Registry
from gitreg.verify.service import Report, Verifier
from tests.attestations import spec_check
from tests.support.server import cli_process

ROOT = base64.b64encode(bytes(range(32))).decode()


def test_credentials_follow_terraforms_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".terraform.d").mkdir(parents=True)
    config = tmp_path / "cli.tfrc"
    config.write_text('credentials "reg.example.com" {\n  token = "from-config"\n}\n')
    stored = {"credentials": {"reg.example.com": {"token": "t"}, "b.example.com": {"token": "f"}}}
    (home / ".terraform.d" / "credentials.tfrc.json").write_text(json.dumps(stored))
    env = {
        "HOME": str(home),
        "TF_CLI_CONFIG_FILE": str(config),
        "TF_TOKEN_reg_example_com": "from-env",
        "TF_TOKEN_my__reg_example_com": "dashed",
    }
    assert token_for("reg.example.com", env) == "from-config"
    assert token_for("B.example.com", env) == "f"
    assert token_for("my-reg.example.com", env) == "dashed"
    assert token_for("other.example.com", env) is None
    assert token_for("reg.example.com", {"HOME": str(home)}) == "t"


@pytest.mark.parametrize(
    ("source", "host", "subdir"),
    [
        ("127.0.0.1:8443/acme/net/aws", "127.0.0.1:8443", ""),
        ("registry.example.com/acme/net/aws//modules/vpc", "registry.example.com", "modules/vpc"),
        ("acme/net/aws", "registry.terraform.io", ""),
    ],
)
def test_registry_sources(source: str, host: str, subdir: str) -> None:
    found = registry_module(Installed("net", source, "1.0.0", Path("/x")))
    assert found is not None
    assert (found.host, found.address, found.subdir) == (host, "acme/net/aws", subdir)


@pytest.mark.parametrize("source", ["git::https://example.com/x.git", "./local", "../up"])
def test_other_sources_are_not_registry_modules(source: str) -> None:
    assert registry_module(Installed("x", source, "", Path("/x"))) is None


def test_dirhash_of_archive_and_extracted_tree_agree(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in {"main.tf": b"a\n", "sub/x.tf": b"b\n", "z/\u00e9.txt": b"c"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in {"link.tf": "main.tf", "sub/up": "../z", "dangling": "nope"}.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    buffer.seek(0)
    from_archive = archive_dirhash(buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer, mode="r:gz") as tar:
        tar.extractall(tmp_path / "tree", filter="tar")
    assert tree_dirhash(tmp_path / "tree") == from_archive
    plain = tmp_path / "plain"
    for name, data in {"main.tf": b"a\n", "sub/x.tf": b"b\n", "z/\u00e9.txt": b"c"}.items():
        (plain / name).parent.mkdir(parents=True, exist_ok=True)
        (plain / name).write_bytes(data)
    assert tree_dirhash(plain) == spec_check.dirhash_h1(plain)


def test_lock_file_round_trip_and_refusal(tmp_path: Path) -> None:
    path = tmp_path / "modules.lock.json"
    assert read_lock(path).modules == {}
    lock = LockFile(
        {"net": Locked("h.example.com/a/b/c", "1.0.0", "h1:x", "k", 3)},
        {"h.example.com": LockedCheckpoint("h.example.com/v1/attestations/log", 4, ROOT)},
    )
    write_lock(path, lock)
    assert read_lock(path) == lock
    assert path.read_text().endswith("}\n")
    path.write_text('{"version": 9}')
    with pytest.raises(BadRequest):
        read_lock(path)


@pytest.mark.parametrize("root", ["!!!", "cm9vdA=="], ids=["not-base64", "not-32-bytes"])
def test_a_lock_file_with_a_broken_checkpoint_root_is_refused(tmp_path: Path, root: str) -> None:
    # Not a rewritten log, nor a malformed answer of the registry: the lock file is wrong.
    path = tmp_path / "modules.lock.json"
    lock = LockFile(checkpoints={"h.example.com": LockedCheckpoint("h/log", 4, ROOT)})
    write_lock(path, lock)
    path.write_text(path.read_text().replace(ROOT, root))
    with pytest.raises(BadRequest, match="checkpoint root"):
        read_lock(path)


def test_a_manifest_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    manifest = tmp_path / ".terraform" / "modules" / "modules.json"
    manifest.mkdir(parents=True)
    with pytest.raises(BadRequest, match="cannot read"):
        read_manifest(tmp_path)
    manifest.rmdir()
    entry = {"Key": "net", "Source": "h.example.com/a/b/c", "Version": "1.0.0", "Dir": "x\u0000"}
    manifest.write_text(json.dumps({"Modules": [entry]}))
    with pytest.raises(BadRequest, match="not a module manifest"):
        read_manifest(tmp_path)


def test_a_host_name_idna_refuses_fails_its_module_in_one_line(tmp_path: Path) -> None:
    _installed(tmp_path)
    manifest = tmp_path / ".terraform" / "modules" / "modules.json"
    manifest.write_text(manifest.read_text().replace("public.example.com", "xn--zz.example.com"))
    report = _verify_against(tmp_path, _no_attestations, LockFile())
    (failed,) = report.failed
    assert "xn--zz.example.com is not a host name that can be reached" in failed


def test_a_statement_changed_by_one_byte_is_refused() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitreg.attestations import dsse
    from gitreg.attestations.keys import verify_ed25519

    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes_raw()
    good = dsse.envelope(b'{"_type":"x"}', "k", private.sign)
    verifiers = {"k": lambda sig, msg: verify_ed25519(raw, sig, msg)}
    assert dsse.open_envelope(json.dumps(good).encode(), verifiers) == (b'{"_type":"x"}', "k")
    for field, at in (("payload", 3), ("sig", 5)):
        forged = json.loads(json.dumps(good))
        holder = forged if field == "payload" else forged["signatures"][0]
        decoded = bytearray(base64.b64decode(holder[field]))
        decoded[at] ^= 1
        holder[field] = base64.b64encode(bytes(decoded)).decode()
        with pytest.raises(BadRequest, match="no signature"):
            dsse.open_envelope(json.dumps(forged).encode(), verifiers)


def _installed(tmp_path: Path) -> None:
    manifest = tmp_path / ".terraform" / "modules"
    manifest.mkdir(parents=True)
    (manifest / "net").mkdir()
    (manifest / "modules.json").write_text(
        json.dumps(
            {
                "Modules": [
                    {"Key": "", "Source": "", "Dir": "."},
                    {
                        "Key": "net",
                        "Source": "public.example.com/acme/net/aws",
                        "Version": "1.0.0",
                        "Dir": ".terraform/modules/net",
                    },
                    {"Key": "git", "Source": "git::https://example.com/x.git", "Dir": "x"},
                ]
            }
        )
    )


def _verify_against(
    tmp_path: Path, answer: Callable[[httpx.Request], httpx.Response], lock: LockFile
) -> Report:
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        return Verifier(lambda host: Registry(client, host)).verify(tmp_path, lock, readonly=True)


def _no_attestations(request: httpx.Request) -> httpx.Response:
    assert request.url.path == "/.well-known/terraform.json"
    return httpx.Response(200, json={"modules.v1": "/v1/modules/"})


def _proxied(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/.well-known/terraform.json":
        return httpx.Response(200, json={"modules.v1": "/m/", "attestations.v1": "/a/"})
    assert request.url.path == "/m/acme/net/aws/1.0.0/attestation"
    return httpx.Response(404, headers={"Gitreg-Not-Attested": "proxied"}, json={"errors": []})


@pytest.mark.parametrize("answer", [_no_attestations, _proxied])
def test_modules_without_statements_are_unverifiable_not_failed(
    tmp_path: Path, answer: Callable[[httpx.Request], httpx.Response]
) -> None:
    _installed(tmp_path)
    report = _verify_against(tmp_path, answer, LockFile())
    assert report.failed == []
    assert report.verified == []
    assert len(report.unverifiable) == 2


def test_a_locked_module_whose_registry_stopped_signing_fails(tmp_path: Path) -> None:
    _installed(tmp_path)
    locked = Locked("public.example.com/acme/net/aws", "1.0.0", "h1:x", "k", 0)
    report = _verify_against(tmp_path, _no_attestations, LockFile({"net": locked}))
    assert len(report.failed) == 1
    assert "modules.lock.json has it verified" in report.failed[0]


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("deep", "reason"),
    [("statement", "not a DSSE envelope: RecursionError"), ("keys", "malformed")],
)
def test_json_nested_too_deep_fails_its_module_in_one_line(
    tmp_path: Path, deep: str, reason: str
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/.well-known/terraform.json":
            return httpx.Response(200, json={"modules.v1": "/m/", "attestations.v1": "/a/"})
        if path == "/m/acme/net/aws/1.0.0/attestation":
            body = DEEP if deep == "statement" else b"{}"
            return httpx.Response(200, content=body, headers={"Gitreg-Log-Index": "0"})
        assert path == "/a/keys"
        return httpx.Response(200, content=DEEP if deep == "keys" else b'{"keys": []}')

    _installed(tmp_path)
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        report = Verifier(lambda host: Registry(client, host)).verify(tmp_path, LockFile(), False)
    (failed,) = report.failed
    assert reason in failed


def test_local_files_nested_too_deep_are_usage_errors(tmp_path: Path) -> None:
    lock = tmp_path / "modules.lock.json"
    lock.write_bytes(DEEP)
    with pytest.raises(BadRequest, match="cannot read"):
        read_lock(lock)
    manifest = tmp_path / ".terraform" / "modules" / "modules.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_bytes(DEEP)
    with pytest.raises(BadRequest, match="not a module manifest"):
        read_manifest(tmp_path)


def test_a_checkpoint_signed_for_another_log_fails(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitreg.archives.dirhash import hash1
    from gitreg.attestations import dsse, note
    from gitreg.attestations.keys import keyid_of, pem_of

    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes_raw()
    keyid = keyid_of(raw)
    statement = {
        "subject": [
            {"name": "acme/net/aws/1.0.0.tar.gz", "digest": {"sha256": "0" * 64}},
            {"name": "acme/net/aws/1.0.0", "digest": {"dirHash": hash1([])}},
        ],
        "predicate": {"buildDefinition": {"externalParameters": {}}},
    }
    envelope = dsse.envelope(json.dumps(statement).encode(), keyid, private.sign)
    # Signed by this registry's key, but for a log that is not this registry's.
    elsewhere = note.sign(note.Checkpoint("other.example.com/log", 1, bytes(32)), raw, private.sign)

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/.well-known/terraform.json":
            return httpx.Response(200, json={"modules.v1": "/m/", "attestations.v1": "/a/"})
        if path == "/m/acme/net/aws/1.0.0/attestation":
            return httpx.Response(200, json=envelope, headers={"Gitreg-Log-Index": "0"})
        if path == "/a/keys":
            return httpx.Response(200, json={"keys": [{"keyid": keyid, "pem": pem_of(raw)}]})
        assert path == "/a/log/checkpoint"
        return httpx.Response(200, content=elsewhere)

    _installed(tmp_path)
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        report = Verifier(lambda host: Registry(client, host)).verify(tmp_path, LockFile(), False)
    (failed,) = report.failed
    assert "the checkpoint is for log 'other.example.com/log'" in failed


def test_a_registry_that_cannot_be_reached_is_asked_once_per_run(tmp_path: Path) -> None:
    asked: list[str] = []

    def unreachable(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        raise httpx.ConnectTimeout("timed out", request=request)

    modules = [
        {"Key": f"m{n}", "Source": "slow.example.com/acme/net/aws", "Version": "1.0.0", "Dir": "x"}
        for n in range(5)
    ]
    manifest = tmp_path / ".terraform" / "modules" / "modules.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"Modules": modules}))
    with httpx.Client(transport=httpx.MockTransport(unreachable)) as client:
        report = Verifier(lambda host: Registry(client, host)).verify(tmp_path, LockFile(), False)
    assert len(report.failed) == 5
    assert all("cannot reach slow.example.com" in line for line in report.failed)
    assert asked == ["/.well-known/terraform.json"]  # each timeout is waited out once


def _only_local_modules(workdir: Path) -> Path:
    """A directory `terraform init` left with one local module: nothing to ask a registry."""
    manifest = workdir / ".terraform" / "modules" / "modules.json"
    manifest.parent.mkdir(parents=True)
    (workdir / "local").mkdir()
    local = {"Key": "local", "Source": "./local", "Dir": "local"}
    manifest.write_text(json.dumps({"Modules": [{"Key": "", "Source": "", "Dir": "."}, local]}))
    return workdir / "modules.lock.json"


def _file_size_limited(limit: int) -> Callable[[], None]:
    def limit_file_size() -> None:  # in the child: writes past `limit` fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_file_size


def test_a_lock_file_that_cannot_be_written_is_one_error_line(tmp_path: Path) -> None:
    # A real failed write, whoever runs the tests (root writes to read-only directories).
    lock_path = _only_local_modules(tmp_path / "work")
    before = LockFile(checkpoints={"h.example.com": LockedCheckpoint("h/log", 4, ROOT)})
    write_lock(lock_path, before)
    old = lock_path.read_bytes()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gitreg",
            "verify",
            str(lock_path.parent),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_file_size_limited(16),
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"gitreg: error: cannot write {lock_path}: File too large")
    assert "Traceback" not in done.stderr
    assert lock_path.read_bytes() == old
    assert sorted(p.name for p in lock_path.parent.iterdir()) == [
        ".terraform",
        "local",
        "modules.lock.json",
    ]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_lock_file_that_is_not_a_file_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    lock_path = _only_local_modules(tmp_path / "work")
    if kind == "directory":
        lock_path.mkdir()
    else:
        os.mkfifo(lock_path)  # no writer: reading it would wait for ever
    done = cli_process(tmp_path / "data", "verify", str(lock_path.parent), check=False, timeout=20)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"gitreg: error: cannot read {lock_path}: ")
