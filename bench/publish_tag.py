"""One new tag, from `git push` to installable (part of bench/publish.py).

The forge is the synthetic bare repository. Each round makes a commit on its main
branch, tags it in a clone and times:

1. webhook: `git push origin TAG` to the forge, then the GitHub push delivery it
   would send (signed with the repository's secret, as bench/webhooks.py) to a
   running `gitreg serve`, whose job thread syncs; until the versions answer lists
   the version and its archive downloads. Baseline and now each have their server,
   on their own data dir, and get the same delivery one after the other.
2. CLI: the same for the next tag with `gitreg sync MODULE` instead of the webhook.

Each server's CPU seconds for the delivery (from /proc) are reported next to wall.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib as b

sys.path.insert(0, str(b.ROOT))  # tests.support: the signed webhook deliveries
from tests.support.webhooks import delivery

MODULE = "acme/big/aws"
# As registered by bench/publish.py (REGISTER), so the servers accept the deliveries.
FORGE_REPO = "acme/terraform-aws-big"
SECRET = "bench-publish-secret"  # noqa: S105 (a made-up secret for the bench)


@dataclass
class Side:
    """One gitreg (baseline or now): its data dir, code dir and running server."""

    label: str
    data: Path
    cwd: Path | None
    server: b.Server


def start(label: str, data: Path, cwd: Path | None, tls: b.Tls, ws: Path) -> Side:
    """`gitreg serve` of the code in `cwd` (None: this checkout)."""
    port = b.free_port()
    # -P: `python -m` would put the current directory first on the path; the
    # baseline must import its own copy of gitreg from PYTHONPATH.
    command = [b.PYTHON, "-P", "-m", "gitreg", "serve", "--data-dir", str(data)]
    command += ["--port", str(port), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    # No periodic reconcile: it would publish the tag before the webhook or the CLI.
    command += ["--reconcile-interval", "0"]
    env = {"PYTHONPATH": str(cwd or b.ROOT)}
    server = b.spawn(label, command, ws / f"{label}-{port}.log", port, b.SERVER_CPU, env)
    b.wait_https(server, "/healthz", tls.ca)
    return Side(label, data, cwd, server)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process (and children it waited for)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def deliver(side: Side, tls: b.Tls, tag: str, commit: str) -> None:
    """The push event GitHub sends for a new tag (tests/fixtures/webhooks), signed
    with the repository's secret, to `side`'s server."""
    prepared = delivery(
        "github", "push-tag-created", repo=FORGE_REPO, tag=tag, after=commit, secret=SECRET
    )
    request = urllib.request.Request(
        side.server.url(prepared.route),
        data=prepared.body,
        headers=prepared.headers,
        method="POST",
    )
    context = ssl.create_default_context(cafile=str(tls.ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    b.require(status == 202, f"{side.label}: webhook answered {status}: {text[:300]!r}")


def installable(side: Side, tls: b.Tls, version: str, deadline_s: float = 120) -> None:
    """Until the versions answer lists `version`, then its archive downloaded whole."""
    path = f"/v1/modules/{MODULE}/versions"
    start = time.perf_counter()
    while time.perf_counter() - start < deadline_s:
        status, _, body = b.fetch(side.server.url(path), tls.ca)
        if status == 200 and any(
            v["version"] == version for v in json.loads(body)["modules"][0]["versions"]
        ):
            break
        time.sleep(0.01)
    else:
        raise SystemExit(f"{side.label}: {version} not listed within {deadline_s} s")
    url = side.server.url(f"/v1/modules/{MODULE}/{version}/download")
    status, headers, _ = b.fetch(url, tls.ca)
    b.require(status == 204, f"{side.label}: download answered {status}")
    status, _, body = b.fetch(headers["X-Terraform-Get"], tls.ca)
    b.require(status == 200 and len(body) > 0, f"{side.label}: archive answered {status}")


def push(clone: Path, src: b.SyntheticRepo, tag: str) -> tuple[str, float]:
    """A commit on the forge's main, tagged in the clone and pushed: (commit, push s)."""
    commit = src.add_commit()
    b.git(clone, "fetch", "-q", "origin", "main")
    b.git(clone, "tag", tag, commit)
    start = time.perf_counter()
    b.git(clone, "push", "-q", "origin", f"refs/tags/{tag}")
    return commit, time.perf_counter() - start


def rounds(
    src: b.SyntheticRepo, sides: list[Side], tls: b.Tls, ws: Path, count: int
) -> list[list[Any]]:
    """Rows: tag, path, push s, then per side wall s (push to installable) and CPU s."""
    clone = ws / "clone.git"
    b.git(ws, "clone", "-q", "--bare", str(src.path), str(clone))
    rows: list[list[Any]] = []
    for n in range(count):
        for path in ("webhook", "CLI sync"):
            tag = f"v2.{n}.{len(rows) % 2}"
            commit, pushed = push(clone, src, tag)
            row: list[Any] = [tag, path, pushed]
            for side in sides:
                b.wait_quiet()
                cpu, start = cpu_seconds(side.server.pid), time.perf_counter()
                if path == "webhook":
                    deliver(side, tls, tag, commit)
                else:
                    done = b.gitreg_cli(side.data, "sync", MODULE, cwd=side.cwd)
                    b.require("1 published" in done.stdout, f"sync: {done.stdout[-300:]}")
                    cpu -= done.cpu_seconds
                installable(side, tls, tag.lstrip("v"))
                row += [pushed + time.perf_counter() - start, cpu_seconds(side.server.pid) - cpu]
            rows.append(row)
    return rows


def table(sides: list[Side], rows: list[list[Any]]) -> str:
    head = ["tag", "path", "git push s"]
    for side in sides:
        head += [f"{side.label}: push to installable s", f"{side.label}: CPU s"]
    return b.table(head, [[r[0], r[1], *(f"{v:.2f}" for v in r[2:])] for r in rows])
