"""`gitreg verify` over many installed modules, beside `terraform init` of the same directory.

A monorepo with `--modules` module directories of `--files` files each
(`modules/modNN/...`, one tag) is published with `repo add --modules`; a
Terraform configuration calls every module; `terraform init` installs them
from `gitreg serve` over TLS. Then `gitreg verify` runs in this process
(Verifier with one httpx client): the first run (cold: new connection, tiles
fetched, every tree hashed) and warm runs (the client already connected, the
page cache warm), and once `--readonly` against the lock file just written.

    GITREG_BENCH_NO_WAIT=1 python bench/verify.py [--modules 100] [--files 200] [--runs 5]

Target: a warm run under 2 s for 100 modules of 200 files.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import benchlib as b

sys.path.insert(0, str(b.ROOT))  # tests.support, for the real Terraform CLI


def _monorepo(path: Path, modules: int, files: int) -> None:
    path.mkdir(parents=True)
    b.git(path, "init", "-q", "-b", "main")
    for m in range(modules):
        folder = path / "modules" / f"mod{m:03d}"
        for f in range(files):
            sub = folder / f"d{f % 10}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{f:03d}.tf").write_text(f"# module {m} file {f}\n" + "x" * (200 + f))
        (folder / "main.tf").write_text(f'output "n" {{\n  value = {m}\n}}\n')
    b.git(path, "add", "-A")
    b.git(path, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", "all")
    b.git(path, "tag", "v1.0.0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    import httpx

    from gitreg.verify.lockfile import read_lock, write_lock
    from gitreg.verify.registry import Registry
    from gitreg.verify.service import Verifier

    with b.workspace("verify", args.keep) as ws, b.servers() as running:
        tls = b.make_tls(ws / "tls")
        b.progress(f"monorepo: {args.modules} modules x {args.files} files")
        _monorepo(ws / "src", args.modules, args.files)
        data = ws / "data"
        added = b.gitreg_cli(
            data,
            *("repo", "add", str(ws / "src"), "--modules", "modules/*"),
            *("--namespace", "acme", "--system", "aws"),
        )
        b.require(f"{args.modules} published" in added.stdout, added.stdout[-500:])
        server = b.start_gitreg(data, tls, ws, cpu=None)
        running.append(server)
        host = f"127.0.0.1:{server.port}"
        work = ws / "work"
        work.mkdir()
        (work / "main.tf").write_text(
            "".join(
                f'module "m{m:03d}" {{\n  source  = "{host}/acme/mod{m:03d}/aws"\n'
                '  version = "1.0.0"\n}\n'
                for m in range(args.modules)
            )
        )
        from tests.support.terraform import run_terraform

        b.progress("terraform init")
        started = time.perf_counter()
        run_terraform(work, "init", ca_pem=tls.ca)
        init_seconds = time.perf_counter() - started
        os.environ["SSL_CERT_FILE"] = str(tls.ca)
        rows = []
        with httpx.Client(timeout=30) as client:
            for run in range(args.runs + 1):
                lock = read_lock(work / "modules.lock.json")
                readonly = run == args.runs
                b.progress(f"verify run {run + 1}{' --readonly' if readonly else ''}")
                started = time.perf_counter()
                report = Verifier(lambda h: Registry(client, h)).verify(work, lock, readonly)
                seconds = time.perf_counter() - started
                b.require(not report.failed, "\n".join(report.failed[:5]))
                b.require(len(report.verified) == args.modules, str(len(report.verified)))
                if run == 0:
                    write_lock(work / "modules.lock.json", report.lock)
                label = "cold (first)" if run == 0 else ("warm --readonly" if readonly else "warm")
                rows.append([label, args.modules, args.modules * args.files, f"{seconds:.2f}"])
        print(f"## gitreg verify ({datetime.date.today()}, {b.machine_line()})\n")
        print(f"`terraform init` of the same directory: {init_seconds:.1f} s\n")
        print(b.table(["run", "modules", "files", "seconds"], rows))


if __name__ == "__main__":
    main()
