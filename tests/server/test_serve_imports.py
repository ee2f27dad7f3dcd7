"""A serving worker does not load what only some paths need (the per-worker
memory target, docs/performance.md). `gitreg serve` runs in a subprocess; once it
has answered discovery, a versions lookup and an archive, a thread in that
process lists which of the heavy packages are in sys.modules. Each is still
loaded by the path that needs it (the catalog, signing, mirror and doctor
tests exercise those)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from gitreg.storage.blobs import FileBlobStore
from tests.support.server import free_port

# Package: what needs it.
LAZY = {
    "hcl2": "documentation extraction at publish, mirror/proxy configuration files",
    "lark": "python-hcl2's parser",
    "httpx": "mirror and module-proxy upstream requests, forges, uploads",
    "pysequoia": "provider signing and verification",
    "cryptography": "the local CA (made in a child process)",
    "markdown_it": "README rendering at publish",
    # pyproject.toml's cost comments count on these staying out of an API worker:
    "jinja2": "the web UI's first page",
    "pygments": "the web UI's HCL highlighting",
    "joserfc": "sign-in (id_token validation)",
    "isal": "building a module archive",
}

PROBE = """
import json, os, signal, sys, threading, time, urllib.request
import uvicorn
port, sha = int(sys.argv[1]), sys.argv[2]
real_run = uvicorn.run

def look():
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/healthz").read()
            break
        except OSError:
            time.sleep(0.05)
    urllib.request.urlopen(base + "/.well-known/terraform.json").read()
    try:
        urllib.request.urlopen(base + "/v1/modules/acme/net/aws/versions").read()
    except OSError:
        pass
    urllib.request.urlopen(base + f"/archives/{sha}.tar.gz").read()
    print(json.dumps(sorted(m for m in LAZY if m in sys.modules)), flush=True)
    os.kill(os.getpid(), signal.SIGINT)

def run(*args, **kwargs):
    threading.Thread(target=look, daemon=True).start()
    real_run(*args, **kwargs)

uvicorn.run = run
from gitreg.cli import main
main(["serve", "--no-tls", "--port", str(port), "--data-dir", sys.argv[3]])
"""


def test_serving_worker_does_not_import_lazy_packages(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sha = FileBlobStore(data / "blobs").put_bytes(b"x" * 100_000).sha256
    script = f"LAZY = {sorted(LAZY)!r}\n{PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", script, str(free_port()), sha, str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert lines, done.stdout + done.stderr
    assert json.loads(lines[-1]) == []


def test_malloc_arenas_are_limited_unless_the_environment_says(tmp_path: Path) -> None:
    """gitreg.server.limits.limit_malloc_arenas, in fresh processes: on glibc it
    sets the arena limit; an operator's MALLOC_ARENA_MAX is left in force."""
    code = "from gitreg.server.limits import limit_malloc_arenas as f; print(f())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert plain.stdout.strip() == str(platform.libc_ver()[0] == "glibc")
    env["MALLOC_ARENA_MAX"] = "4"
    told = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert told.stdout.strip() == "False"
