"""Lighthouse scores of the web UI's page kinds (targets in docs/ui.md).

Starts a real `gitreg serve` over TLS with the modules of tests/support/readmes.py
(a terraform-docs README with a logo, a CI badge, `<details>`, aligned tables, a
submodule and an example) and the same README grown to about 200 KB by a
1,500-row Inputs table, then runs Lighthouse's phone profile (its default: a
mid-range phone, simulated slow 4G and a 4x slower CPU) `--runs` times on each
page and prints the medians as a Markdown table.

A README's own images are the author's: the test README's badge names a host
this machine cannot reach, and its 16 px logo is shown 120 px wide, which costs
a page two best-practice audits that gitreg cannot pass for the author. With
`--images served` (the default), the README is the one a careful author
writes: its badge host answers (a local server, mapped in Chromium with
`--host-resolver-rules`) and its logo is as large as it is shown. With
`--images as-written`, the test README is measured as it is.

    npm i -E lighthouse@12.2.3   # in a scratch directory
    python bench/lighthouse.py --lighthouse /path/to/node_modules/.bin/lighthouse
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fake_upstream import serve_app_tls
from tests.support.gitrepo import GitRepo
from tests.support.readmes import TERRAFORM_DOCS_README, network_module, png
from tests.support.server import cli, free_port, start_server

CATEGORIES = ("performance", "accessibility", "best-practices")
BADGE = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="80" height="20">'
    '<rect width="80" height="20" fill="#2e7d32"/></svg>'
)


def _large_readme(rows: int = 1500) -> str:
    table = "".join(
        f'| <a name="input_setting_{i}"></a> [setting\\_{i}](#input\\_setting\\_{i}) '
        f'| Setting number {i} of the network | `string` | `"value-{i}"` | no |\n'
        for i in range(rows)
    )
    return TERRAFORM_DOCS_README.replace(
        '| <a name="input_name"></a>', table + '| <a name="input_name"></a>'
    )


def _publish(root: Path, host: str, served_images: bool) -> Path:
    data = root / "data"
    for name, readme in (("net", TERRAFORM_DOCS_README), ("big", _large_readme())):
        repo = GitRepo(root / f"terraform-aws-{name}")
        network_module(repo, host)
        repo.write("README.md", readme)
        if served_images:
            (repo.path / "docs/logo.png").write_bytes(png(240))
        repo.commit("first")
        repo.tag("v1.0.0")
        cli(data, "repo", "add", str(repo.path), "--module", f"acme/{name}/aws")
    return data


def _badge_server() -> Starlette:
    async def badge(_: object) -> Response:
        return Response(BADGE, media_type="image/svg+xml")

    return Starlette(routes=[Route("/badge.svg", badge)])


def _scores(lighthouse: str, url: str, flags: str, out: Path) -> dict[str, float]:
    subprocess.run(
        [
            lighthouse,
            url,
            f"--only-categories={','.join(CATEGORIES)}",
            f"--chrome-flags={flags}",
            "--output=json",
            f"--output-path={out}",
            "--quiet",
        ],
        check=True,
        env={**os.environ, "CHROME_PATH": os.environ.get("CHROME_PATH", "/usr/bin/chromium")},
    )
    report = json.loads(out.read_text())
    audits = report["audits"]
    failed = [
        ref["id"]
        for c in CATEGORIES[1:]
        for ref in report["categories"][c]["auditRefs"]
        if ref["weight"] and audits[ref["id"]]["score"] not in (None, 1)
    ]
    print(f"{url}: audits failed: {failed or 'none'}", file=sys.stderr)
    for item in audits["errors-in-console"].get("details", {}).get("items", []):
        where = item.get("sourceLocation", {}).get("url", "")
        print(f"  console: {item.get('description')} {where}", file=sys.stderr)
    found = {c: report["categories"][c]["score"] * 100 for c in CATEGORIES}
    found["CLS"] = audits["cumulative-layout-shift"]["numericValue"]
    found["TBT ms"] = audits["total-blocking-time"]["numericValue"]
    found["KiB"] = audits["total-byte-weight"]["numericValue"] / 1024
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lighthouse", default="lighthouse", help="the lighthouse command")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--images", choices=("served", "as-written"), default="served")
    args = parser.parse_args()
    pages = {
        "home": "/",
        "search": "/search?q=net",
        "module": "/modules/acme/net/aws",
        "submodule": "/modules/acme/net/aws/1.0.0/modules/subnets",
        "module with a 200 KB README": "/modules/acme/big/aws",
    }
    with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as scratch:
        root = Path(scratch)
        port = free_port()
        served = args.images == "served"
        data = _publish(root, f"127.0.0.1:{port}", served)
        server = start_server(data, "--reconcile-interval", "0", port=port)
        flags = "--headless --no-sandbox --ignore-certificate-errors"
        try:
            with serve_app_tls(_badge_server(), root / "badge-tls") as (badge_port, _, _):
                if served:
                    flags += f' --host-resolver-rules="MAP ci.example.com 127.0.0.1:{badge_port}"'
                print(f"| page | {' | '.join(CATEGORIES)} | CLS | TBT ms | sent KiB |")
                print("| --- | --- | --- | --- | --- | --- | --- |")
                for label, path in pages.items():
                    runs = [
                        _scores(args.lighthouse, server.url + path, flags, root / f"{n}.json")
                        for n in range(args.runs)
                    ]
                    print(f"{label}: {runs}", file=sys.stderr)
                    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                    print(
                        f"| {label} | "
                        + " | ".join(f"{median[c]:.0f}" for c in CATEGORIES)
                        + f" | {median['CLS']:.3f} | {median['TBT ms']:.0f}"
                        + f" | {median['KiB']:.0f} |",
                        flush=True,
                    )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
