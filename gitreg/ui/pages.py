"""Rendered pages: the security headers, the per-app state and the page cache.

Every page carries a strict Content-Security-Policy: no inline script or
style, scripts and styles only from this origin, nothing may frame it, forms
post only here. README images may come from any https host (they point at
the module's forge, gitreg/catalog/readme.py). The CSP is defence in depth:
README HTML is already sanitised at publish and every other value is
escaped by the templates.

Rendered pages are cached per (page, what the viewer may see, host): a hit
is one dict lookup and one Response. The cache follows the metadata cache's
generation, which moves on every publish in this process and on every
commit seen by its `data_version` watch (gitreg/cache.py), so a publish
invalidates pages exactly as it invalidates metadata. Pages are larger than
metadata answers, so this cache is bounded by bytes, least recently used
first, rather than by the metadata cache's entry count.
"""

from __future__ import annotations

import gzip
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.ui.render import Renderer
from gitreg.ui.viewer import Viewer

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",  # frame-ancestors for browsers without CSP 2
    # Pages depend on the reader's token cookie: never shared, always revalidated.
    "Cache-Control": "private, no-cache",
    "Vary": "Cookie, Accept-Encoding",
}
HTML = "text/html; charset=utf-8"
PAGE_CACHE_BYTES = 16 * 1024 * 1024
GZIP_MIN_BYTES = 1024  # smaller pages gain less than the header costs
_NO_GZIP = re.compile(r"(?:^|,)\s*gzip\s*;\s*q\s*=\s*0(?:\.0*)?\s*(?:,|$)", re.IGNORECASE)


def accepts_gzip(request: Request) -> bool:
    accepted = request.headers.get("accept-encoding", "").lower()
    return "gzip" in accepted and _NO_GZIP.search(accepted) is None


def html_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        body, status_code=status, media_type=HTML, headers=SECURITY_HEADERS | (headers or {})
    )


@dataclass(frozen=True)
class Page:
    """A rendered page; gzipped once, on the first request that accepts it,
    and kept with the page (a large README's page is a tenth of its size)."""

    body: bytes
    status: int = 200
    _gzipped: list[bytes] = field(default_factory=list, compare=False, repr=False)

    def response(self, request: Request | None = None) -> Response:
        if request is None or len(self.body) < GZIP_MIN_BYTES or not accepts_gzip(request):
            return html_response(self.body, self.status)
        if not self._gzipped:
            self._gzipped.append(gzip.compress(self.body, compresslevel=6, mtime=0))
        return html_response(self._gzipped[0], self.status, {"Content-Encoding": "gzip"})


@dataclass
class PageCache:
    """Rendered pages of the current metadata generation, bounded by bytes."""

    max_bytes: int = PAGE_CACHE_BYTES
    generation: int = -1
    size: int = 0
    pages: OrderedDict[Hashable, Page] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: Hashable, generation: int) -> Page | None:
        if generation != self.generation:
            return None
        found = self.pages.get(key)
        if found is not None:
            # An LRU touch; a concurrent clear may have removed the key meanwhile.
            with self.lock:
                if key in self.pages:
                    self.pages.move_to_end(key)
        return found

    def put(self, key: Hashable, page: Page, generation: int) -> None:
        with self.lock:
            if generation != self.generation:
                # Built for a newer generation: start over; for an older one: drop.
                if generation < self.generation:
                    return
                self.pages, self.size, self.generation = OrderedDict(), 0, generation
            if len(page.body) > self.max_bytes // 8:
                return
            old = self.pages.pop(key, None)
            self.size += len(page.body) - (len(old.body) if old else 0)
            self.pages[key] = page
            while self.size > self.max_bytes:
                _, evicted = self.pages.popitem(last=False)
                self.size -= len(evicted.body)


@dataclass
class UiState:
    """What the UI keeps for the app's lifetime, made on the first page."""

    renderer: Renderer
    pages: PageCache


_STATE_LOCK = threading.Lock()


def ui_state(request: Request) -> UiState:
    """The app's UI state, created on first use (typed access to app.state)."""
    found = getattr(request.app.state, "ui", None)
    if isinstance(found, UiState):
        return found
    with _STATE_LOCK:
        found = getattr(request.app.state, "ui", None)
        if not isinstance(found, UiState):
            found = UiState(Renderer.create(), PageCache())
            request.app.state.ui = found
    return found


def render(
    request: Request, viewer: Viewer | None, template: str, context: dict[str, Any]
) -> bytes:
    state = ui_state(request)
    # Whether to offer "Sign in": a setting, the same for every page of the process.
    sign_in = bool(services(request).settings.oidc_issuer)
    query = request.url.query
    here = request.url.path + (f"?{query}" if query else "")  # where sign-in returns to
    common = {"viewer": viewer, "path": request.url.path, "here": here, "sign_in": sign_in}
    return state.renderer.page(template, common | context)


def error_page(
    request: Request, viewer: Viewer | None, status: int, title: str, message: str
) -> Response:
    body = render(
        request, viewer, "error.html", {"status": status, "title": title, "message": message}
    )
    return html_response(body, status)


def not_found_page(request: Request, viewer: Viewer | None) -> Response:
    """The same answer for what does not exist and for what this reader may
    not see: nothing in it depends on which of the two it was."""
    return error_page(
        request, viewer, 404, "Page not found", "There is nothing here, or nothing you may read."
    )
