"""The baseline: a bare Starlette app under uvicorn, started by the benchmarks.

It answers fixed bytes from memory (or a file with Starlette's stock
`FileResponse`, default 64 KiB chunks) for the routes listed in a JSON file,
and runs uvicorn with the options `gitreg serve` uses for one worker
(gitreg/server/cli.py): same host, TLS files, log level, no server header,
no proxy headers, 10 s graceful shutdown; with uvicorn's fast extras,
httptools and uvloop, the baseline of the performance targets (`--http h11 --loop
asyncio` for the pure-Python pair), and uvicorn's own access log as uvicorn
has it by default (on at log level info).

    python bench/bare_server.py --routes R.json --port P (--cert C --key K | --no-tls)

R.json: {"bytes": [{"path", "status", "media_type", "headers", "body_b64"}],
         "files": [{"path", "file", "media_type", "headers"}]}
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route


def bytes_route(spec: dict[str, Any]) -> Route:
    body = base64.b64decode(spec["body_b64"])
    status = int(spec.get("status", 200))
    media_type = spec.get("media_type")
    headers = dict(spec.get("headers", {}))

    async def handler(request: Request) -> Response:
        return Response(body, status_code=status, media_type=media_type, headers=headers)

    return Route(spec["path"], handler, methods=["GET"])


def file_route(spec: dict[str, Any]) -> Route:
    path = spec["file"]
    media_type = spec.get("media_type")
    headers = dict(spec.get("headers", {}))

    async def handler(request: Request) -> Response:
        return FileResponse(path, media_type=media_type, headers=headers)

    return Route(spec["path"], handler, methods=["GET", "HEAD"])


def create_app(routes_file: Path) -> Starlette:
    spec = json.loads(routes_file.read_text())
    routes = [bytes_route(r) for r in spec.get("bytes", [])]
    routes += [file_route(r) for r in spec.get("files", [])]

    async def ready(request: Request) -> Response:
        return Response(status_code=204)

    routes.append(Route("/__ready", ready))
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--routes", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--no-tls", action="store_true", help="plain HTTP")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--http", default="httptools", choices=["httptools", "h11"])
    parser.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"])
    args = parser.parse_args()
    if not args.no_tls and not (args.cert and args.key):
        parser.error("--cert and --key, or --no-tls")
    # The same keyword arguments as gitreg.server.cli.serve() with workers == 1.
    uvicorn.run(
        create_app(args.routes),
        host="127.0.0.1",
        port=args.port,
        log_level=args.log_level,
        server_header=False,
        proxy_headers=False,
        forwarded_allow_ips=None,
        timeout_graceful_shutdown=10,
        http=args.http,
        loop=args.loop,
        ssl_certfile=None if args.no_tls else args.cert,
        ssl_keyfile=None if args.no_tls else args.key,
    )


if __name__ == "__main__":
    main()
