"""The web UI's routes; app.py adds them after every API route.

    GET  /                                   home: search, recent versions, namespaces
    GET  /search?q=&page=                    search results
    GET  /modules/:namespace                 a namespace's modules and providers
    GET  /modules/:namespace/:name/:system   the latest version (`?tab=`, `?version=`)
    GET  /modules/:namespace/:name/:system/usage   who uses it (publishers only)
    GET  /modules/:namespace/:name/:system/changes the diff of two versions (`?version=&from=`)
    GET  /modules/:namespace/:name/:system/:version
    GET  /modules/:namespace/:name/:system/:version/modules/:sub    a submodule
    GET  /modules/:namespace/:name/:system/:version/examples/:sub   an example
    GET  /modules/:namespace/:name/:system/:version/files/:path     a file of the version
    GET  /modules/:namespace/:name/:system/:version/raw/:path       its bytes (README images)
    GET  /providers/:namespace/:type         the latest version
    GET  /providers/:namespace/:type/:version
    GET  /mirror                             what the mirror and the module proxy hold
    GET  /ui/token, POST /ui/token           the read-token cookie
    GET|POST /ui/sign-in, GET /ui/sign-in/callback   sign-in at the identity provider
    GET  /ui/sign-out                        the sign-out button (the header's link)
    POST /ui/sign-out                        ends the session, forgets the token
    GET  /ui/tokens, POST /ui/tokens, POST /ui/tokens/revoke   a person's own tokens
    GET  /ui/admin/tokens, POST /ui/admin/tokens/revoke       every token (admins)
    GET  /ui/admin/audit                     the audit log (admins)
    GET  /ui/static/:hash/:file              CSS, JS and the icon, cached for a year
    GET  /favicon.ico                        a redirect to the icon

None of these paths is a prefix of an API path (`/v1/`, `/.well-known/`,
`/archives/`, `/mirror/...`, `/webhooks/`, `/admin/`, `/healthz`): `/mirror`
matches only that exact path, and the mirror protocol's files are four
segments below it. Browsers asking for anything else get an HTML 404 page
(`wants_html`); API clients keep the JSON error contract.
"""

from __future__ import annotations

import functools
import gzip

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gitreg.audit import pages as audit_pages
from gitreg.auth import pages as sign_in
from gitreg.auth import pages_tokens as tokens_page
from gitreg.catalog import pages as browse_pages
from gitreg.catalog.pages_files import file_page, raw_file
from gitreg.catalog.pages_module import module_page
from gitreg.catalog.pages_nested import example_page, submodule_page
from gitreg.catalog.pages_provider import provider_doc_page, provider_page
from gitreg.semver_guard.pages import changes_page
from gitreg.ui.pages import accepts_gzip, not_found_page, ui_state
from gitreg.ui.viewer import current_viewer
from gitreg.usage.pages import usage_page

# API paths: their errors stay JSON whatever the client accepts.
API_PREFIXES = (
    "/v1/",
    "/.well-known/",
    "/archives/",
    "/mirror/",
    "/webhooks/",
    "/admin/",
    "/healthz",
    "/readyz",
    "/metrics",
)
STATIC_CACHE = "public, max-age=31536000, immutable"
STATIC_TYPES = {
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "svg": "image/svg+xml",
}


async def static_file(request: Request) -> Response:
    found = ui_state(request).renderer.assets.get(request.path_params["file"])
    if found is None or found[0] != request.path_params["hash"]:
        return await html_not_found(request)
    media = STATIC_TYPES[request.path_params["file"].rpartition(".")[2]]
    headers = {"Cache-Control": STATIC_CACHE, "X-Content-Type-Options": "nosniff"}
    if media.startswith("image/"):
        headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    body = found[1]
    if accepts_gzip(request):
        body, headers["Content-Encoding"] = _gzipped(found[0], body), "gzip"
    headers["Vary"] = "Accept-Encoding"
    return Response(body, media_type=media, headers=headers)


@functools.lru_cache(maxsize=16)
def _gzipped(content_hash: str, data: bytes) -> bytes:
    """A static file gzipped once per content (its hash names it)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


async def favicon(request: Request) -> Response:
    """Browsers ask for /favicon.ico whatever the page names: the icon."""
    url = ui_state(request).renderer.static_url("favicon.svg")
    return RedirectResponse(url, status_code=301, headers={"Cache-Control": "max-age=86400"})


def wants_html(request: Request) -> bool:
    """A browser asking for a page outside the API."""
    path = request.url.path
    if any(path.startswith(prefix) for prefix in API_PREFIXES):
        return False
    return request.method in ("GET", "HEAD") and "text/html" in request.headers.get("accept", "")


async def html_not_found(request: Request) -> Response:
    return not_found_page(request, await current_viewer(request))


def routes() -> list[Route]:
    module = "/modules/{namespace}/{name}/{system}"
    provider = "/providers/{namespace}/{type}"
    return [
        Route("/", browse_pages.home, methods=["GET"]),
        Route("/search", browse_pages.search, methods=["GET"]),
        Route("/mirror", browse_pages.mirror, methods=["GET"]),
        Route("/modules/{namespace}", browse_pages.namespace, methods=["GET"]),
        Route(module, module_page, methods=["GET"]),
        Route(module + "/usage", usage_page, methods=["GET"]),  # before {version}
        Route(module + "/changes", changes_page, methods=["GET"]),  # before {version}
        Route(module + "/{version}", module_page, methods=["GET"]),
        Route(module + "/{version}/modules/{sub}", submodule_page, methods=["GET"]),
        Route(module + "/{version}/examples/{sub}", example_page, methods=["GET"]),
        Route(module + "/{version}/files/{path:path}", file_page, methods=["GET"]),
        Route(module + "/{version}/raw/{path:path}", raw_file, methods=["GET"]),
        Route(provider, provider_page, methods=["GET"]),
        Route(provider + "/{version}", provider_page, methods=["GET"]),
        Route(provider + "/{version}/docs/{doc_id}", provider_doc_page, methods=["GET"]),
        Route("/ui/token", sign_in.token_form, methods=["GET"]),
        Route("/ui/token", sign_in.token_submit, methods=["POST"]),
        Route("/ui/sign-out", sign_in.sign_out, methods=["POST"]),
        Route("/ui/sign-out", sign_in.sign_out_page, methods=["GET"]),
        Route("/ui/sign-in", sign_in.sign_in_page, methods=["GET"]),
        Route("/ui/sign-in", sign_in.sign_in, methods=["POST"]),
        Route(sign_in.CALLBACK, sign_in.callback, methods=["GET"]),
        Route("/ui/tokens", tokens_page.tokens_page, methods=["GET"]),
        Route("/ui/tokens", tokens_page.create_token, methods=["POST"]),
        Route("/ui/tokens/revoke", tokens_page.revoke_own, methods=["POST"]),
        Route("/ui/admin/tokens", tokens_page.admin_page, methods=["GET"]),
        Route("/ui/admin/tokens/revoke", tokens_page.admin_revoke, methods=["POST"]),
        Route(audit_pages.PATH, audit_pages.audit_page, methods=["GET"]),
        Route("/ui/static/{hash}/{file}", static_file, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
    ]
