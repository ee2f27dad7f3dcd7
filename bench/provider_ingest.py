"""Time to ingest one provider release of 8 platforms x 20 MB.

Two paths, each on a fresh data dir, median of `--rounds`:

- local: `ProviderPublisher.publish` of a goreleaser dist/ directory (what
  `gitreg provider publish DIR` and the upload endpoint's last step do):
  signature check, sha256 of every zip, layout check and h1 (unpack) of
  every zip, copy into the blob store with fsync, one transaction;
- forge: the same after downloading every asset from the fake GitHub releases
  API over TLS on 127.0.0.1 (tests/support/fake_github.py), as a webhook job does.

Zips hold 20 MB of random bytes each (incompressible, so each zip is ~20 MB).

    python bench/provider_ingest.py [--rounds 3] [--size-mb 20] [--platforms 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gitreg.providers.collect import collect  # noqa: E402
from tests.support.fake_github import FakeGitHub  # noqa: E402
from tests.support.provider_dist import (  # noqa: E402
    Dist,
    make_services,
    provider_zip,
    public_armor,
    publisher_key,
)

PLATFORMS = [
    "linux_amd64",
    "linux_arm64",
    "linux_386",
    "linux_arm",
    "darwin_amd64",
    "darwin_arm64",
    "windows_amd64",
    "freebsd_amd64",
]


def make_release(platforms: int, size: int) -> Dist:
    dist = Dist("big", "1.0.0", {})
    for platform in PLATFORMS[:platforms]:
        dist.files[dist.zip_name(platform)] = provider_zip("big", "1.0.0", os.urandom(size))
    dist.reshasum(publisher_key())
    return dist


def local_round(dist: Dist, work: Path) -> float:
    svc = make_services(work / "data")
    svc.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    provider = svc.provider_publisher.store.add_provider("acme", "big")
    files = collect(dist.write(work / "dist").iterdir(), "big", "1.0.0", strict=False)
    started = time.perf_counter()
    result = svc.provider_publisher.publish(provider, "1.0.0", files, sign=False, source="bench")
    elapsed = time.perf_counter() - started
    assert result.status == "published"
    svc.close()
    return elapsed


def forge_round(dist: Dist, work: Path) -> float:
    github = FakeGitHub(work / "gh-tls", token="bench").start()  # noqa: S106
    try:
        data = work / "data"
        data.mkdir()
        (data / "gitreg.toml").write_text(
            f'[forges.github]\napi_url = "{github.api_url}"\ntoken = "bench"\n'
            f'ca_file = "{github.ca_file}"\n'
        )
        svc = make_services(data)
        svc.provider_publisher.keys.add("acme", public_armor(publisher_key()))
        repo = svc.index.add_repo(str(work), "acme/terraform-provider-big")
        svc.provider_publisher.store.add_provider("acme", "big", repo.id, "github")
        github.add_release("acme/terraform-provider-big", "v1.0.0", dist.files)
        started = time.perf_counter()
        result = svc.provider_publisher.sync_repo(repo)
        elapsed = time.perf_counter() - started
        assert result.published, result.summary()
        svc.close()
        return elapsed
    finally:
        github.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=20)
    parser.add_argument("--platforms", type=int, default=8)
    args = parser.parse_args()
    dist = make_release(args.platforms, args.size_mb * 1_000_000)
    total = sum(len(d) for n, d in dist.files.items() if n.endswith(".zip"))
    print(f"release: {args.platforms} zips, {total / 1e6:.0f} MB in total")
    for name, run in (("local", local_round), ("forge", forge_round)):
        times = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
                times.append(run(dist, Path(tmp)))
        median = statistics.median(times)
        rounds = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:<6} median {median:.2f} s  ({rounds}; {total / 1e6 / median:.0f} MB/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
