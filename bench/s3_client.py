"""Which S3 client library gitreg uses: boto3 (the reference) or obstore, by measurement.

For each library, in a fresh interpreter that has already imported what `gitreg serve`
imports (so the numbers are what one worker pays on top): the import time (median of
`--runs` fresh interpreters), VmRSS after the import, and VmRSS and VmHWM after a first
request (a put, a ranged read of the whole object, a head) against moto's S3 server on
127.0.0.1 (started in this process, `moto.server.ThreadedMotoServer`).

    python bench/s3_client.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import textwrap
import urllib.request

import benchlib as b
from moto.server import ThreadedMotoServer

# Moto logs every request it serves; the table is the output.
logging.getLogger("werkzeug").setLevel(logging.ERROR)

BASE = "import gitreg.app, gitreg.server.cli"

CLIENTS = {
    "boto3": (
        "import boto3",
        """
        client = boto3.client("s3")
        client.put_object(Bucket="bench", Key="k", Body=b"x" * 1024)
        body = client.get_object(Bucket="bench", Key="k")["Body"]
        assert len(body.read()) == 1024
        client.head_object(Bucket="bench", Key="k")
        """,
    ),
    "obstore": (
        "import obstore, obstore.store",
        """
        store = obstore.store.S3Store("bench", client_options={"allow_http": True})
        obstore.put(store, "k", b"x" * 1024)
        assert len(obstore.get(store, "k").bytes()) == 1024
        obstore.head(store, "k")
        """,
    ),
}

PROBE = """
import json, time
def vm():
    found = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found
BASE
before = vm()["VmRSS"]
start = time.perf_counter()
IMPORTS
import_ms = (time.perf_counter() - start) * 1000
after_import = vm()["VmRSS"]
REQUEST
after = vm()
print(json.dumps({"before": before, "import_ms": import_ms, "after_import": after_import,
                  "after_request": after["VmRSS"], "hwm": after["VmHWM"]}))
"""


def probe(name: str, env: dict[str, str]) -> dict[str, float]:
    imports, request = CLIENTS[name]
    code = (
        PROBE.replace("BASE", BASE)
        .replace("IMPORTS", imports)
        .replace("REQUEST", textwrap.dedent(request))
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    found: dict[str, float] = json.loads(out.stdout)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    port = b.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    try:
        # moto accepts any credentials; a bare PUT creates the bucket.
        create = urllib.request.Request(f"{env['AWS_ENDPOINT_URL']}/bench", method="PUT")
        urllib.request.urlopen(create, timeout=10).close()
        rows = []
        for name in CLIENTS:
            runs = [probe(name, env) for _ in range(args.runs)]
            last = runs[-1]
            rows.append(
                (
                    name,
                    f"{statistics.median(r['import_ms'] for r in runs):.0f}",
                    f"{last['before']:.1f}",
                    f"+{last['after_import'] - last['before']:.1f}",
                    f"+{last['after_request'] - last['before']:.1f}",
                    f"{last['hwm']:.1f}",
                )
            )
        print(b.machine_line())
        print()
        headers = (
            "client",
            "import ms (median)",
            "RSS before, MiB",
            "after import",
            "after 1st request",
            "peak (VmHWM), MiB",
        )
        print(b.table(headers, rows))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
