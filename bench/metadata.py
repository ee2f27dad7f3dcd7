"""Metadata answers: gitreg vs a bare Starlette handler vs nginx, over HTTP and HTTPS.

Target: `gitreg serve` as installed, default logging on, answers
discovery, module `versions` and module `download` (and the module's OCI tag list and
manifest) at >= 0.9x a bare Starlette handler
returning the same bytes from memory on uvicorn with httptools + uvloop
(bench/bare_server.py, one worker), with p99 <= 5 ms at 32 connections, measured in the
same run. nginx (one worker) serving the same bytes as static files is the physical limit
(left out, and said so, where nginx is not installed). `--before DIR` adds a column for
gitreg from another source tree (an older commit), in the same run.

    python bench/metadata.py [--seconds 5] [--rounds 3] [--connections 32]
        [--schemes http,https] [--before DIR] [--after DIR]

Each server is pinned to CPU 1 and wrk to CPU 0. Rounds interleave the servers, and the
table shows the median round. The module has 50 versions published from a git repository.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
from collections import defaultdict
from pathlib import Path

import benchlib as b

MODULE = "acme/bench/aws"
# Headers every server makes itself; all others are copied from gitreg's answers.
OWN_HEADERS = {"date", "server", "content-length", "content-type", "connection"}
VERSIONS = 50


def endpoints(version: str) -> dict[str, str]:
    return {
        "discovery": "/.well-known/terraform.json",
        "versions": f"/v1/modules/{MODULE}/versions",
        "download": f"/v1/modules/{MODULE}/{version}/download",
        # The same module over OCI (docs/oci.md): from the same metadata cache.
        "oci-tags": f"/v2/modules/{MODULE}/tags/list",
        "oci-manifest": f"/v2/modules/{MODULE}/manifests/{version}",
    }


def capture(server: b.Server, paths: dict[str, str], tls: b.Tls) -> dict[str, dict[str, object]]:
    """What gitreg answers, so the baselines can answer the very same bytes."""
    answers: dict[str, dict[str, object]] = {}
    for name, path in paths.items():
        status, headers, body = b.fetch(server.url(path), tls.ca)
        answers[name] = {
            "path": path,
            "status": status,
            "media_type": headers.get("content-type"),
            # Every other header gitreg sends (ETag, Cache-Control, X-Terraform-Get...).
            "headers": {k: v for k, v in headers.items() if k.lower() not in OWN_HEADERS},
            "body": body,
        }
    return answers


def bare_routes(answers: dict[str, dict[str, object]], target: Path) -> Path:
    routes = []
    for answer in answers.values():
        body = answer["body"]
        assert isinstance(body, bytes)
        routes.append(
            {
                "path": answer["path"],
                "status": answer["status"],
                "media_type": answer["media_type"] if body else None,
                "headers": answer["headers"],
                "body_b64": base64.b64encode(body).decode(),
            }
        )
    target.write_text(json.dumps({"bytes": routes}))
    return target


def nginx_site(answers: dict[str, dict[str, object]], root: Path) -> str:
    """Static files for the JSON answers, `return 204` for download; gitreg's headers added."""
    locations = []
    for answer in answers.values():
        path = str(answer["path"])
        body = answer["body"]
        headers = answer["headers"]
        assert isinstance(body, bytes) and isinstance(headers, dict)
        add = "".join(f"            add_header {k} {json.dumps(v)};\n" for k, v in headers.items())
        if answer["status"] == 204:
            locations.append(
                f"        location = {path} {{\n{add}            return 204;\n        }}"
            )
            continue
        file = root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(body)
        locations.append(
            f"        location = {path} {{\n            default_type application/json;\n"
            f"            etag off;\n{add}        }}"
        )
    return "\n".join(locations)


def check_same(answers: dict[str, dict[str, object]], other: b.Server, tls: b.Tls) -> None:
    for name, answer in answers.items():
        status, headers, body = b.fetch(other.url(str(answer["path"])), tls.ca)
        b.require(status == answer["status"], f"{other.name} {name}: status {status}")
        b.require(body == answer["body"], f"{other.name} {name}: different body")
        expected = answer["headers"]
        assert isinstance(expected, dict)
        for key, value in expected.items():
            if other.name == "before" and key.lower() in ("x-request-id", "x-terraform-get"):
                continue  # made per request (a request id, a signed URL)
            b.require(headers.get(key) == value, f"{other.name} {name}: different {key}")


class PlainServer(b.Server):
    """A server answering plain HTTP (benchlib's servers speak TLS)."""

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _started(server: b.Server, scheme: str, ready: str, tls: b.Tls) -> b.Server:
    if scheme == "http":
        server = PlainServer(server.name, server.process, server.port, server.log_path)
    b.wait_https(server, ready, tls.ca)  # urllib ignores the TLS context for http://
    return server


def start_gitreg(
    data: Path, tls: b.Tls, ws: Path, scheme: str, name: str, source: Path | None
) -> b.Server:
    """`gitreg serve` as installed (one worker, default logging), from `source` if given."""
    port = b.free_port()
    tls_args = ["--no-tls"] if scheme == "http" else ["--tls-cert", str(tls.cert)]
    tls_args += [] if scheme == "http" else ["--tls-key", str(tls.key)]
    # -P: without it `-m` puts the working directory first on sys.path, and a
    # benchmark run from a checkout would measure that checkout as `before` too.
    flags = ["-P"] if source else []
    command = [b.PYTHON, *flags, "-m", "gitreg", "serve", "--data-dir", str(data)]
    command += ["--port", str(port)]
    env = {"PYTHONPATH": str(source)} if source else None
    server = b.spawn(name, [*command, *tls_args], ws / f"{name}-{port}.log", port, env=env)
    return _started(server, scheme, "/healthz", tls)


def start_bare(routes: Path, tls: b.Tls, ws: Path, scheme: str) -> b.Server:
    port = b.free_port()
    command = [b.PYTHON, str(b.BENCH_DIR / "bare_server.py"), "--routes", str(routes)]
    command += ["--port", str(port)]
    command += (
        ["--no-tls"] if scheme == "http" else ["--cert", str(tls.cert), "--key", str(tls.key)]
    )
    server = b.spawn("bare", command, ws / f"bare-{port}.log", port)
    return _started(server, scheme, "/__ready", tls)


def start_nginx(root: Path, tls: b.Tls, ws: Path, scheme: str, locations: str) -> b.Server:
    """nginx, one worker, access log on (its default, as gitreg's)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    directory = ws / f"nginx-{scheme}"
    directory.mkdir(parents=True, exist_ok=True)
    port = b.free_port()
    conf = b.NGINX_CONF.format(
        dir=directory,
        access=f"{directory}/access.log",
        port=port,
        cert=tls.cert,
        key=tls.key,
        root=root,
        locations=locations,
    )
    if scheme == "http":
        conf = conf.replace(f"127.0.0.1:{port} ssl;", f"127.0.0.1:{port};")
    (directory / "nginx.conf").write_text(conf)
    command = [nginx, "-c", str(directory / "nginx.conf"), "-e", str(directory / "error.log")]
    server = b.spawn("nginx", command, directory / "stdout.log", port)
    return _started(server, scheme, "/__ready", tls)


SERVERS = ("before", "gitreg", "bare", "nginx")


def run_scheme(
    args: argparse.Namespace, ws: Path, data: Path, tls: b.Tls, scheme: str, latest: str
) -> dict[tuple[str, str], list[b.Load]]:
    paths = endpoints(latest)
    results: dict[tuple[str, str], list[b.Load]] = defaultdict(list)
    with b.servers() as started:
        gitreg = start_gitreg(data, tls, ws, scheme, "gitreg", args.after)
        started.append(gitreg)
        answers = capture(gitreg, paths, tls)
        versions_body = answers["versions"]["body"]
        assert isinstance(versions_body, bytes)
        b.require(
            len(json.loads(versions_body)["modules"][0]["versions"]) == VERSIONS,
            "all versions listed",
        )
        order = [gitreg]
        if args.before:
            order.append(start_gitreg(data, tls, ws, scheme, "before", args.before))
            started.append(order[-1])
        order.append(
            start_bare(bare_routes(answers, ws / f"routes-{scheme}.json"), tls, ws, scheme)
        )
        started.append(order[-1])
        if shutil.which("nginx") or Path("/usr/sbin/nginx").exists():
            root = ws / f"nginx-root-{scheme}"
            order.append(start_nginx(root, tls, ws, scheme, nginx_site(answers, root)))
            started.append(order[-1])
        for other in order[1:]:
            check_same(answers, other, tls)
        for server in order:
            for path in paths.values():
                b.wrk(server.url(path), seconds=1, connections=args.connections)
        for round_no in range(args.rounds):
            # Alternate who goes first, so drift on a shared VM does not favour one.
            this_round = order if round_no % 2 == 0 else order[::-1]
            for name, path in paths.items():
                if name not in args.endpoints:
                    continue
                for server in this_round:
                    load = b.measure(
                        server, path, seconds=args.seconds, connections=args.connections
                    )
                    b.require(load.errors == 0 and load.non2xx == 0, f"{server.name} {name}")
                    results[(server.name, name)].append(load)
    return results


def run(args: argparse.Namespace, ws: Path) -> str:
    tls = b.make_tls(ws / "tls")
    src = b.synthetic_repo(ws / "module.git", files=12, tags=VERSIONS, small=True)
    data = ws / "data"
    b.gitreg_cli(data, "repo", "add", str(src.path), "--module", MODULE)
    latest = src.tags[-1].lstrip("v")
    out = [
        "## Metadata answers: gitreg vs bare Starlette vs nginx",
        "",
        f"Machine: {b.machine_line()}",
        "",
        f"wrk -t1 -c{args.connections} -d{args.seconds}s per cell, keep-alive; HTTPS with one"
        " ECDSA P-256 certificate for all; servers pinned to CPU 1, wrk to CPU 0;"
        f" {args.rounds} interleaved rounds after a 1 s warm-up (order alternates), medians"
        " shown. Every server has its default logging on: gitreg its JSON access line, bare"
        " Starlette uvicorn's access log (httptools + uvloop), nginx its access log (one"
        " worker). `before` is gitreg from another source tree (--before) in the same run."
        " gitreg/bare is the median of per-round paired ratios (min-max in brackets); CPU"
        " us/req is the server process's user+system CPU per answered request (/proc)."
        f" Module with {VERSIONS} versions.",
    ]
    for scheme in args.schemes:
        results = run_scheme(args, ws, data, tls, scheme, latest)
        names = [name for name in endpoints(latest) if name in args.endpoints]
        out += ["", f"### {scheme.upper()}", "", render(results, names)]
        out += ["", b.contention_note([x for runs in results.values() for x in runs])]
    return "\n".join(out)


def _cell(results: dict[tuple[str, str], list[b.Load]], server: str, name: str) -> str:
    loads = results.get((server, name))
    return f"{b.median([x.rps for x in loads]):,.0f}" if loads else "-"


def _ratio(results: dict[tuple[str, str], list[b.Load]], top: str, bottom: str, name: str) -> str:
    a, c = results.get((top, name)), results.get((bottom, name))
    if not a or not c:
        return "-"
    # Paired per round: each round's servers ran back to back.
    ratios = sorted(x.rps / y.rps for x, y in zip(a, c, strict=True))
    return f"{b.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def render(results: dict[tuple[str, str], list[b.Load]], names: list[str]) -> str:
    rows = []
    for name in names:
        g = results[("gitreg", name)]
        ratio = b.median([x.rps / y.rps for x, y in zip(g, results[("bare", name)], strict=True)])
        p99 = b.median([x.p99_ms for x in g])
        cpu = [
            f"{b.median([x.cpu_us_per_request for x in results[(s, name)]]):.0f}"
            for s in SERVERS
            if (s, name) in results
        ]
        rows.append(
            [
                name,
                *(_cell(results, s, name) for s in SERVERS),
                _ratio(results, "before", "bare", name),
                _ratio(results, "gitreg", "bare", name),
                _ratio(results, "gitreg", "nginx", name),
                " / ".join(cpu),
                _latency(g),
                _latency(results[("bare", name)]),
                "yes" if ratio >= 0.90 else "NO",
                "yes" if p99 <= 5 else "NO",
            ]
        )
    headers = [
        "endpoint",
        *(f"{s} req/s" for s in SERVERS),
        "before/bare",
        "gitreg/bare (range)",
        "gitreg/nginx",
        "CPU us/req " + " / ".join(SERVERS),
        "gitreg p50/p99 ms",
        "bare p50/p99 ms",
        ">= 0.9x bare",
        "p99 <= 5 ms",
    ]
    return b.table(headers, rows)


def _latency(loads: list[b.Load]) -> str:
    p50 = b.median([x.p50_ms for x in loads])
    p99 = b.median([x.p99_ms for x in loads])
    return f"{p50:.2f} / {p99:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--schemes", type=lambda text: text.split(","), default=["http", "https"])
    parser.add_argument(
        "--endpoints",
        type=lambda text: text.split(","),
        default=["discovery", "versions", "download", "oci-tags", "oci-manifest"],
        help="which to measure (a noisy cell rerun alone)",
    )
    parser.add_argument(
        "--after", type=Path, help="gitreg source tree to run (default: as imported)"
    )
    parser.add_argument("--before", type=Path, help="another gitreg source tree, run alongside")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    with b.workspace("metadata", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()
