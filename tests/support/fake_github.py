"""A local server shaped like GitHub's REST releases API and its asset downloads.

It runs over TLS on 127.0.0.1 with its own test CA (gitreg.server.tls), so gitreg
reaches it exactly as it reaches GitHub Enterprise with a private CA: through
a `[forges.NAME]` table with `api_url` and `ca_file` (docs/providers.md).

Shapes follow GitHub's documentation ("REST API endpoints for releases" and
"... for release assets", API version 2022-11-28):
- `GET /repos/{owner}/{repo}/releases/tags/{tag}` -> a release, 404 when none;
- `GET /repos/{owner}/{repo}/releases?per_page=N` -> releases, newest first;
- `GET /repos/{owner}/{repo}/releases/assets/{id}` -> the asset's JSON, or with
  `Accept: application/octet-stream` a 302 to a storage URL on another origin
  (here `https://localhost:PORT/storage/...`, as github.com redirects to
  objects.githubusercontent.com), which serves the bytes.
With a token set, API calls without `Authorization: Bearer <token>` get 404,
as GitHub answers for a private repository. Every request is recorded, so
tests can check that the token never reaches the storage origin.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from gitreg.server.tls import ensure_local_tls
from tests.support.server import free_port
from tests.support.threaded_server import ThreadedServer

STAMP = "2024-01-02T03:04:05Z"


@dataclass
class SeenRequest:
    method: str
    host: str
    path: str
    authorized: bool


@dataclass
class FakeRelease:
    id: int
    repo: str
    tag: str
    draft: bool
    created_at: str
    assets: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # name -> (id, bytes)


class FakeGitHub:
    def __init__(self, tls_dir: Path, token: str = "") -> None:
        self.token = token
        self.port = free_port()
        self.tls = ensure_local_tls(tls_dir, ["127.0.0.1", "localhost"])
        self.releases: list[FakeRelease] = []
        self.seen: list[SeenRequest] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._served: ThreadedServer | None = None

    # -- what tests use -------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.tls.ca_cert

    def add_release(
        self,
        repo: str,
        tag: str,
        assets: dict[str, bytes],
        draft: bool = False,
        created_at: str | None = None,
    ) -> FakeRelease:
        with self._lock:
            release = FakeRelease(next(self._ids), repo, tag, draft, created_at or _now())
            self.releases.append(release)
        for name, data in assets.items():
            self.add_asset(release, name, data)
        return release

    def add_asset(self, release: FakeRelease, name: str, data: bytes) -> None:
        with self._lock:
            release.assets[name] = (next(self._ids), data)

    def release_json(self, release: FakeRelease) -> dict[str, Any]:
        base = f"{self.api_url}/repos/{release.repo}"
        return {
            "url": f"{base}/releases/{release.id}",
            "html_url": f"https://github.com/{release.repo}/releases/tag/{release.tag}",
            "assets_url": f"{base}/releases/{release.id}/assets",
            "upload_url": f"https://uploads.github.com/repos/{release.repo}/releases/{release.id}"
            "/assets{?name,label}",
            "tarball_url": f"{base}/tarball/{release.tag}",
            "zipball_url": f"{base}/zipball/{release.tag}",
            "id": release.id,
            "node_id": f"RE_{release.id}",
            "tag_name": release.tag,
            "target_commitish": "main",
            "name": release.tag,
            "body": "",
            "draft": release.draft,
            "prerelease": "-" in release.tag,
            "created_at": release.created_at,
            "published_at": None if release.draft else release.created_at,
            "author": {"login": "goreleaserbot", "id": 1, "type": "Bot"},
            "assets": [
                {
                    "url": f"{base}/releases/assets/{asset_id}",
                    "browser_download_url": f"https://github.com/{release.repo}/releases/download"
                    f"/{release.tag}/{name}",
                    "id": asset_id,
                    "node_id": f"RA_{asset_id}",
                    "name": name,
                    "label": "",
                    "state": "uploaded",
                    "content_type": "application/octet-stream",
                    "size": len(data),
                    "download_count": 0,
                    "created_at": release.created_at,
                    "updated_at": release.created_at,
                    "uploader": {"login": "goreleaserbot", "id": 1, "type": "Bot"},
                }
                for name, (asset_id, data) in release.assets.items()
            ],
        }

    def webhook(
        self, release: FakeRelease, secret: str, action: str = "published"
    ) -> tuple[bytes, dict[str, str]]:
        """A `release` event delivery: body and headers, signed like GitHub's."""
        owner, name = release.repo.split("/")
        payload = {
            "action": action,
            "release": self.release_json(release),
            "repository": {
                "id": 4242,
                "name": name,
                "full_name": release.repo,
                "private": True,
                "owner": {"login": owner, "type": "Organization"},
                "html_url": f"https://github.com/{release.repo}",
                "clone_url": f"https://github.com/{release.repo}.git",
                "default_branch": "main",
            },
            "organization": {"login": owner},
            "sender": {"login": "goreleaserbot", "type": "Bot"},
        }
        body = json.dumps(payload).encode()
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/abc123",
            "X-GitHub-Event": "release",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "1",
            "X-Hub-Signature-256": f"sha256={digest}",
        }
        return body, headers

    # -- the server ---------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return bool(self.token) and request.headers.get("authorization") == f"Bearer {self.token}"

    def _record(self, request: Request) -> None:
        with self._lock:
            self.seen.append(
                SeenRequest(
                    request.method,
                    request.headers.get("host", ""),
                    request.url.path,
                    "authorization" in request.headers,
                )
            )

    def _repo_releases(self, request: Request) -> list[FakeRelease] | None:
        self._record(request)
        if self.token and not self._authorized(request):
            return None
        repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
        with self._lock:
            return [r for r in self.releases if r.repo == repo]

    async def _by_tag(self, request: Request) -> Response:
        found = self._repo_releases(request)
        tag = request.path_params["tag"]
        # GitHub does not show drafts by tag name.
        match = [r for r in found or [] if r.tag == tag and not r.draft]
        if not match:
            return _not_found()
        return JSONResponse(self.release_json(match[-1]))

    async def _list(self, request: Request) -> Response:
        found = self._repo_releases(request)
        if found is None:
            return _not_found()
        per_page = min(100, int(request.query_params.get("per_page", "30")))
        newest = sorted(found, key=lambda r: r.id, reverse=True)[:per_page]
        return JSONResponse([self.release_json(r) for r in newest])

    async def _asset(self, request: Request) -> Response:
        found = self._repo_releases(request)
        asset_id = int(request.path_params["asset_id"])
        for release in found or []:
            for name, (known, _) in release.assets.items():
                if known != asset_id:
                    continue
                if request.headers.get("accept") == "application/octet-stream":
                    storage = f"https://localhost:{self.port}/storage/{asset_id}/{name}"
                    return RedirectResponse(f"{storage}?X-Amz-Signature=abc", status_code=302)
                return JSONResponse({"id": asset_id, "name": name})
        return _not_found()

    async def _storage(self, request: Request) -> Response:
        self._record(request)
        asset_id = int(request.path_params["asset_id"])
        with self._lock:
            for release in self.releases:
                for known, data in release.assets.values():
                    if known == asset_id:
                        return Response(data, media_type="application/octet-stream")
        return Response(b"<Error>NoSuchKey</Error>", status_code=404)

    def start(self) -> FakeGitHub:
        app = Starlette(
            routes=[
                Route("/repos/{owner}/{repo}/releases/tags/{tag}", self._by_tag),
                Route("/repos/{owner}/{repo}/releases", self._list),
                Route("/repos/{owner}/{repo}/releases/assets/{asset_id:int}", self._asset),
                Route("/storage/{asset_id:int}/{name}", self._storage),
            ]
        )
        self._served = ThreadedServer(app, self.port, self.tls.cert, self.tls.key)
        self._served.start("fake GitHub")
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()


def _not_found() -> Response:
    return JSONResponse(
        {
            "message": "Not Found",
            "documentation_url": "https://docs.github.com/rest/releases/releases",
            "status": "404",
        },
        status_code=404,
    )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
