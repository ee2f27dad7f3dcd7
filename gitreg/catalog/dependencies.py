"""Which module calls and provider requirements this registry serves, and
the page each one opens: a dependency is a link where the reader can follow it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from gitreg.catalog.paths import module_path, provider_path

_NESTED = re.compile(r"(modules|examples)/([^/]+)")


def dependency_links(
    module: dict[str, Any],
    here: str,
    page: str,
    host: str,
    modules: Iterable[tuple[str, str, str]],
    providers: Iterable[tuple[str, str]],
) -> dict[str, str]:
    """{source: page} for the calls and requirements of `module` (a document's
    module entry at directory `here` of the version whose page is `page`)
    that open a page here: a local path to the module itself or one of its
    submodules or examples, `HOST/NS/NAME/SYSTEM` of a module this registry
    lists, `HOST/NS/TYPE` of a provider it hosts (`host` is this registry's;
    `modules` and `providers` what the reader may see)."""
    served = {tuple(p.lower() for p in m) for m in modules}
    hosted = {tuple(p.lower() for p in p_) for p_ in providers}
    links: dict[str, str] = {}
    for call in module.get("dependencies", []):
        source = str(call.get("source", ""))
        found = _module_page(source, here, page, host, served)
        if found:
            links[source] = found
    for required in module.get("provider_dependencies", []):
        source = str(required.get("source", ""))
        parts = source.split("/")
        ours = len(parts) == 3 and parts[0].lower() == host.lower()
        if ours and (parts[1].lower(), parts[2].lower()) in hosted:
            links[source] = provider_path(parts[1], parts[2])
    return links


def _module_page(source: str, here: str, page: str, host: str, served: set[tuple[str, ...]]) -> str:
    if source.startswith(("./", "../")):
        path = posixpath.normpath(posixpath.join(here, source))
        if path == ".":
            return page
        nested = _NESTED.fullmatch(path)
        return f"{page}/{nested.group(1)}/{quote(nested.group(2), safe='')}" if nested else ""
    address = source.partition("//")[0]  # a submodule's calls open the module's page
    parts = address.split("/")
    if len(parts) != 4 or parts[0].lower() != host.lower():
        return ""
    if tuple(p.lower() for p in parts[1:]) not in served:
        return ""
    return module_path(*parts[1:])
