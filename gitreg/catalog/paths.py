"""The web UI's paths of modules and providers, for links made at publish
(README links into a version's files) and by the pages alike."""

from __future__ import annotations

from urllib.parse import quote


def module_path(namespace: str, name: str, system: str, version: str | None = None) -> str:
    """`/modules/NS/NAME/SYSTEM[/VERSION]`, each part escaped as a segment."""
    parts = [namespace, name, system] + ([version] if version is not None else [])
    return "/modules/" + "/".join(quote(p, safe="") for p in parts)


def provider_path(namespace: str, type_: str, version: str | None = None) -> str:
    """`/providers/NS/TYPE[/VERSION]`."""
    parts = [namespace, type_] + ([version] if version else [])
    return "/providers/" + "/".join(quote(p, safe="") for p in parts)
