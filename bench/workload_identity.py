"""What a CI workload identity token costs a request (docs/ci.md), against a
gitreg token, in the same run and process.

A local issuer shaped like GitHub Actions' (tests/support/workload_issuer.py)
serves its discovery document and JWKS over TLS; gitreg trusts it by one
`[[workload_identity]]` rule. Measured in turns, medians of `--rounds`, wall
and this process's CPU per call:

- `Access.principal` for a Bearer gitreg token, and for a workload token
  whose decision is cached (the same token again);
- the full request `GET /v1/modules/acme/vpc/aws/versions` of a private
  namespace through the app (Starlette's TestClient, in process) with each;
- the first use of a new workload token (a signature check, the rule match
  and its `sign_in.workload` audit row, one committed transaction), and the
  issuer's JWKS fetches meanwhile: none while the keys are fresh.

    python bench/workload_identity.py [--calls 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.service import Credentials
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli
from tests.support.workload_issuer import WorkloadIssuers

AUDIENCE = "https://registry.example.com"


def _per_call(calls: int, fn: Callable[[], object]) -> tuple[float, float]:
    """(wall us, CPU us) per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


def _first_uses(calls: list[Callable[[], object]]) -> Callable[[], object]:
    """One call after another, each once."""
    pending = iter(calls)
    return lambda: next(pending)()


def _config(issuers: WorkloadIssuers) -> str:
    return f"""
[[workload_identity]]
issuer = "{issuers["github"].url}"
audience = "{AUDIENCE}"
ca_file = "{issuers.ca_file}"

[[workload_identity.rules]]
claims = {{ repository = "acme/infra-live" }}
namespace = "acme"
scope = "read"
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
        root = Path(tmp)
        issuers = WorkloadIssuers(root / "tls").start()
        try:
            data = root / "data"
            data.mkdir()
            (data / "gitreg.toml").write_text(_config(issuers))
            repo = GitRepo(root / "vpc")
            simple_module(repo)
            repo.commit()
            repo.tag("v1.0.0")
            cli(data, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
            cli(data, "namespace", "set", "acme", "--private")
            made = cli(data, "token", "create", "--scope", "read", "--namespace", "acme")
            gitreg_token = made.stdout.split()[-1]
            app = create_app(load_settings({"data_dir": data}, {}))
            svc: Services = app.state.services
            github = issuers["github"]
            workload = github.sign(AUDIENCE, repository="acme/infra-live")
            loop = asyncio.new_event_loop()

            def principal(token: str) -> Callable[[], object]:
                who = Credentials(f"Bearer {token}", "127.0.0.1")
                return lambda: loop.run_until_complete(svc.access.principal(who))

            principal(workload)()  # the keys fetched, the decision cached
            fetched = github.jwks_fetches
            rows: dict[str, list[tuple[float, float]]] = {}
            with TestClient(app, base_url="https://testserver") as client:
                path = "/v1/modules/acme/vpc/aws/versions"

                def request(token: str) -> Callable[[], object]:
                    headers = {"authorization": f"Bearer {token}"}

                    def one() -> None:
                        assert client.get(path, headers=headers).status_code == 200

                    return one

                for _ in range(args.rounds):
                    for name, fn, calls in (
                        ("principal: gitreg token", principal(gitreg_token), args.calls),
                        ("principal: cached workload token", principal(workload), args.calls),
                        ("request: gitreg token", request(gitreg_token), args.calls // 10),
                        ("request: cached workload token", request(workload), args.calls // 10),
                    ):
                        rows.setdefault(name, []).append(_per_call(calls, fn))
                    fresh = [
                        github.sign(AUDIENCE, repository="acme/infra-live")
                        for _ in range(args.calls // 20)
                    ]
                    first = _first_uses([principal(token) for token in fresh])
                    rows.setdefault("principal: first use of a new workload token", []).append(
                        _per_call(len(fresh), first)
                    )
            loop.close()
            svc.close()
        finally:
            issuers.stop()
    print(f"{time.strftime('%Y-%m-%d')}, {args.rounds} rounds, medians\n")
    print("| what | wall us/call | CPU us/call |")
    print("| --- | ---: | ---: |")
    for name, runs in rows.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    print(f"\nJWKS fetches during the measured calls: {github.jwks_fetches - fetched}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
