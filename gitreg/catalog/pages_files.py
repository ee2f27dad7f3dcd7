"""A module version's files, from its stored archive (archive_files.py):

    GET /modules/NS/NAME/SYSTEM/VERSION/raw/PATH     the bytes: README images
    GET /modules/NS/NAME/SYSTEM/VERSION/files/PATH   a page showing the file

Both answer only a reader who may read the namespace, exactly as the module
page does (a private namespace's files are a 404 like anything missing).
Raw answers are never rendered as a document of this origin: an image type
is named only for image files (SVG included, which a README shows as an
`<img>`, where it runs nothing), every other file is an attachment, and all
carry `nosniff` and a `sandbox` policy, so an SVG or HTML file opened on its
own runs no script and reaches nothing of the registry.
"""

from __future__ import annotations

import posixpath

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.catalog.archive_files import MAX_FILE_BYTES, ArchiveFile
from gitreg.catalog.paths import module_path
from gitreg.ui.pages import Page, not_found_page, render
from gitreg.ui.viewer import current_viewer

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".bmp": "image/bmp",
    ".ico": "image/x-icon",
    ".svg": "image/svg+xml",
}
RAW_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Per reader (a private namespace's files depend on the cookie), never shared.
    "Cache-Control": "private, max-age=3600",
    "Vary": "Cookie",
}
_HCL = (".tf", ".tfvars", ".hcl", ".tftest.hcl")
_MARKDOWN = (".md", ".markdown")


def _names(request: Request) -> tuple[str, str, str]:
    p = request.path_params
    return p["namespace"], p["name"], p["system"]


async def _file(request: Request) -> ArchiveFile | None:
    """The file asked for, when this reader may see it."""
    viewer = await current_viewer(request)
    names = _names(request)
    if not viewer.may_read(names[0]):
        return None
    p = request.path_params
    catalog = services(request).catalog
    return await run_in_threadpool(catalog.module_file, names, p["version"], p["path"])


def media_type(path: str) -> str:
    return IMAGE_TYPES.get(posixpath.splitext(path.lower())[1], "application/octet-stream")


async def raw_file(request: Request) -> Response:
    found = await _file(request)
    if found is None or found.data is None:
        return Response(b"not found\n", 404, media_type="text/plain", headers=RAW_HEADERS)
    media = media_type(found.path)
    headers = dict(RAW_HEADERS)
    if not media.startswith("image/"):
        headers["Content-Disposition"] = "attachment"
    return Response(found.data, media_type=media, headers=headers)


async def file_page(request: Request) -> Response:
    found = await _file(request)
    viewer = await current_viewer(request)
    if found is None:
        return not_found_page(request, viewer)
    names, version = _names(request), request.path_params["version"]
    page = module_path(*names, version)
    context = {
        "title": f"{found.path} - {'/'.join(names)} {version}",
        "names": names,
        "version": version,
        "module_url": page,
        "file": found,
        "raw_url": f"{page}/raw/{request.path_params['path']}",
        "max_bytes": MAX_FILE_BYTES,
    } | _shown(found, page)
    return Page(render(request, viewer, "file.html", context)).response(request)


def _shown(found: ArchiveFile, page: str) -> dict[str, object]:
    """How the file is shown: an image, highlighted HCL, rendered Markdown,
    plain text, or not at all (binary or too large)."""
    lower = found.path.lower()
    none = {"image": False, "hcl": "", "markdown": "", "text": ""}
    if media_type(lower).startswith("image/"):
        return none | {"image": True}
    if found.data is None or b"\0" in found.data:
        return none
    try:
        text = found.data.decode("utf-8")
    except UnicodeDecodeError:
        return none
    if lower.endswith(_HCL):
        return none | {"hcl": text}
    if lower.endswith(_MARKDOWN):
        from gitreg.catalog.readme import Links
        from gitreg.catalog.readme import render as render_markdown

        links = Links(posixpath.dirname(found.path), page=page)
        return none | {"markdown": render_markdown(text, links)}
    return none | {"text": text}
