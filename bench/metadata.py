"""Metadata answers: gitreg vs a bare Starlette handler vs nginx, over the same TLS.

Target: gitreg's discovery, module `versions` and module `download` answers within 10% of
a bare Starlette handler returning the same bytes from memory (bench/bare_server.py, same
uvicorn settings, one worker), measured in the same run. nginx (one worker) serving the
same bytes as static files is a third column for scale.

    python bench/metadata.py [--seconds 5] [--rounds 3] [--connections 16]

Each server is pinned to CPU 1 and wrk to CPU 0. Rounds interleave the servers, and the
table shows the median round. The module has 50 versions published from a git repository.
"""

from __future__ import annotations

import argparse
import base64
import json
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
            b.require(headers.get(key) == value, f"{other.name} {name}: different {key}")


def run(args: argparse.Namespace, ws: Path) -> str:
    tls = b.make_tls(ws / "tls")
    src = b.synthetic_repo(ws / "module.git", files=12, tags=VERSIONS, small=True)
    data = ws / "data"
    b.gitreg_cli(data, "repo", "add", str(src.path), "--module", MODULE)
    latest = src.tags[-1].lstrip("v")
    paths = endpoints(latest)
    out = [
        "## Metadata answers: gitreg vs bare Starlette vs nginx",
        "",
        f"Machine: {b.machine_line()}",
        "",
        f"wrk -t1 -c{args.connections} -d{args.seconds}s per cell, keep-alive, TLS (ECDSA P-256,"
        f" same cert for all); servers pinned to CPU 1, wrk to CPU 0; {args.rounds} interleaved"
        " rounds after a 1 s warm-up (order alternates), medians shown. gitreg/bare is the"
        " median of per-round paired ratios (min-max in brackets); CPU us/req is the server"
        " process's user+system CPU per answered request (/proc), which a noisy shared VM"
        f" disturbs far less than req/s. Module with {VERSIONS} versions.",
    ]
    for log_level in args.log_levels:
        with b.servers() as started:
            gitreg = b.start_gitreg(data, tls, ws, log_level)
            started.append(gitreg)
            answers = capture(gitreg, paths, tls)
            versions_body = answers["versions"]["body"]
            assert isinstance(versions_body, bytes)
            b.require(
                len(json.loads(versions_body)["modules"][0]["versions"]) == VERSIONS,
                "all versions listed",
            )
            routes = bare_routes(answers, ws / f"routes-{log_level}.json")
            bare = b.start_bare(routes, tls, ws, log_level)
            started.append(bare)
            root = ws / f"nginx-root-{log_level}"
            nginx = b.start_nginx(
                ws / f"nginx-{log_level}",
                root,
                tls,
                locations=nginx_site(answers, root),
                access_log=log_level in ("debug", "trace", "info"),
            )
            started.append(nginx)
            for other in (bare, nginx):
                check_same(answers, other, tls)
            order = [gitreg, bare, nginx]
            for server in order:
                for path in paths.values():
                    b.wrk(server.url(path), seconds=1, connections=args.connections)
            results: dict[tuple[str, str], list[b.Load]] = defaultdict(list)
            for round_no in range(args.rounds):
                # Alternate who goes first, so drift on a shared VM does not favour one.
                this_round = order if round_no % 2 == 0 else [bare, gitreg, nginx]
                for name, path in paths.items():
                    for server in this_round:
                        load = b.measure(
                            server, path, seconds=args.seconds, connections=args.connections
                        )
                        b.require(load.errors == 0 and load.non2xx == 0, f"{server.name} {name}")
                        results[(server.name, name)].append(load)
        access = "access log on" if log_level in ("debug", "trace", "info") else "access log off"
        out += ["", f"### uvicorn log_level={log_level} ({access}; nginx likewise)", ""]
        out.append(render(results, list(paths)))
        out += ["", b.contention_note([x for runs in results.values() for x in runs])]
    return "\n".join(out)


def render(results: dict[tuple[str, str], list[b.Load]], names: list[str]) -> str:
    rows = []
    for name in names:
        g, s, n = (results[(server, name)] for server in ("gitreg", "bare", "nginx"))
        # Paired per round: each round's gitreg and bare ran back to back.
        ratios = sorted(x.rps / y.rps for x, y in zip(g, s, strict=True))
        ratio = b.median(ratios)
        g_cpu = b.median([x.cpu_us_per_request for x in g])
        s_cpu = b.median([x.cpu_us_per_request for x in s])
        n_cpu = b.median([x.cpu_us_per_request for x in n])
        rows.append(
            [
                name,
                f"{b.median([x.rps for x in g]):,.0f}",
                f"{b.median([x.rps for x in s]):,.0f}",
                f"{b.median([x.rps for x in n]):,.0f}",
                f"{ratio:.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})",
                f"{g_cpu:.0f} / {s_cpu:.0f} / {n_cpu:.0f}",
                f"{s_cpu / g_cpu:.2f}",
                _latency(g),
                _latency(s),
                _latency(n),
                "yes" if ratio >= 0.90 else "NO",
            ]
        )
    headers = [
        "endpoint",
        "gitreg req/s",
        "bare req/s",
        "nginx req/s",
        "gitreg/bare req/s (range)",
        "CPU us/req g / b / n",
        "bare/gitreg CPU",
        "gitreg p50/p99 ms",
        "bare p50/p99 ms",
        "nginx p50/p99 ms",
        "within 10%",
    ]
    return b.table(headers, rows)


def _latency(loads: list[b.Load]) -> str:
    p50 = b.median([x.p50_ms for x in loads])
    p99 = b.median([x.p99_ms for x in loads])
    return f"{p50:.2f} / {p99:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--log-levels",
        type=lambda text: text.split(","),
        default=["info", "warning"],
        help="uvicorn log levels to run (info = gitreg's default, with access log)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    with b.workspace("metadata", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()
