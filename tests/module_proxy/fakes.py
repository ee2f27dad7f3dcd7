"""A public-shaped module registry and a real git smart-HTTP server, both over TLS.

`FakeModuleRegistry` answers exactly as the public registry's module API does
(spec: module-registry-protocol.md, remote-service-discovery.md): discovery
names `modules.v1`, `versions` lists `{"modules": [{"versions": [...]}]}` and
`download` answers 204 with `X-Terraform-Get`. `GitServer` serves bare
repositories with dulwich's smart-HTTP WSGI application (the same protocol
GitHub speaks) under a threaded WSGI server wrapped in TLS from gitreg's local
CA code, so the proxy's fetches are real network git fetches.
"""

from __future__ import annotations

import contextlib
import socketserver
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gitreg.server.tls import ensure_local_tls
from tests.support.fake_upstream import serve_app_tls


@dataclass
class FakeModuleRegistry:
    # (namespace, name, system) -> version -> X-Terraform-Get
    modules: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # served at /files/NAME
    truncated: set[str] = field(default_factory=set)  # files that declare all, send half
    redirect_to: str = ""  # /redirect/PATH answers 302 to redirect_to + PATH
    down: bool = False

    def app(self) -> Starlette:
        async def discovery(request: Request) -> Response:
            return JSONResponse({"modules.v1": "/v1/modules/"})

        def module(request: Request) -> dict[str, str] | None:
            p = request.path_params
            return self.modules.get((p["namespace"], p["name"], p["system"]))

        async def versions(request: Request) -> Response:
            found = module(request)
            if found is None:
                return JSONResponse({"errors": ["Not Found"]}, status_code=404)
            listed = [{"version": v, "submodules": [], "root": {}} for v in found]
            return JSONResponse({"modules": [{"source": "x", "versions": listed}]})

        async def download(request: Request) -> Response:
            found = module(request)
            location = (found or {}).get(request.path_params["version"])
            if location is None:
                return JSONResponse({"errors": ["Not Found"]}, status_code=404)
            return Response(status_code=204, headers={"X-Terraform-Get": location})

        async def files(request: Request) -> Response:
            body = self.files.get(request.path_params["name"])
            if body is None:
                return Response("no such file", status_code=404)
            if request.path_params["name"] in self.truncated:
                return Response(
                    body[: len(body) // 2],
                    media_type="application/octet-stream",
                    headers={"content-length": str(len(body))},
                )
            return Response(body, media_type="application/octet-stream")

        async def redirect(request: Request) -> Response:
            target = self.redirect_to + request.path_params["rest"]
            if request.url.query:
                target += "?" + request.url.query
            return Response(status_code=302, headers={"Location": target})

        async def guard(scope: Any, receive: Any, send: Any) -> None:
            self.requests.append(scope["path"])
            if self.down:
                await Response("down", status_code=503)(scope, receive, send)
            else:
                await inner(scope, receive, send)

        path = "/v1/modules/{namespace}/{name}/{system}"
        inner = Starlette(
            routes=[
                Route("/.well-known/terraform.json", discovery),
                Route(path + "/versions", versions),
                Route(path + "/{version}/download", download),
                Route("/files/{name}", files),
                Route("/redirect/{rest:path}", redirect, methods=["GET", "POST"]),
            ]
        )
        return guard  # type: ignore[return-value]


@contextlib.contextmanager
def serve_registry(registry: FakeModuleRegistry, tls_dir: Path) -> Iterator[str]:
    """Run the fake registry under uvicorn over TLS; yields its https base URL."""
    with serve_app_tls(registry.app(), tls_dir) as (port, _, _):
        yield f"https://127.0.0.1:{port}"


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class GitServer:
    """Bare repositories served at https://127.0.0.1:PORT/NAME.git (smart HTTP)."""

    repos: dict[str, Path] = field(default_factory=dict)  # "org/repo.git" -> bare path
    drip_seconds: float = 0.0  # sleep before each response chunk (a slow drip)
    base: str = ""

    def _app(self) -> Any:
        def app(environ: Any, start_response: Any) -> Iterable[bytes]:
            # Fresh Repo objects per request: dulwich caches peeled refs, and a
            # moved tag must be advertised as GitHub would, at its new commit.
            repos = {f"/{name}".encode(): Repo(str(p)) for name, p in self.repos.items()}
            inner = make_wsgi_chain(DictBackend(repos))  # type: ignore[arg-type]

            def dripping_start(status: str, headers: Any, exc_info: Any = None) -> Any:
                write = start_response(status, headers, exc_info)

                def drip(data: bytes) -> None:
                    # dulwich streams upload-pack through `write`; each
                    # pkt-line write waits first: a server that never stalls
                    # long enough for a read timeout, yet never finishes.
                    time.sleep(self.drip_seconds)
                    write(data)

                return drip if self.drip_seconds else write

            return inner(environ, dripping_start)

        return app

    @contextlib.contextmanager
    def serve(self, tls_dir: Path) -> Iterator[str]:
        tls = ensure_local_tls(tls_dir, ["127.0.0.1"])
        server = make_server(
            "127.0.0.1", 0, self._app(), _ThreadingWSGIServer, handler_class=_QuietHandler
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls.cert), str(tls.key))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.base = f"https://127.0.0.1:{server.server_address[1]}"
        try:
            yield self.base
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
