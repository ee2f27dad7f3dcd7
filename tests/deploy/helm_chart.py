"""Render deploy/helm/gitreg as `helm template` would, with tests/deploy/gotemplate.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.gotemplate import Renderer

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "gitreg"
RELEASE = "acme"


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Helm's values merge: maps merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every manifest the chart renders with `overrides` on top of values.yaml."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = merged(yaml.safe_load((CHART / "values.yaml").read_text()), overrides or {})
    context = {
        "Values": values,
        "Release": {"Name": RELEASE, "Namespace": "default", "Service": "Helm"},
        "Chart": {
            "Name": chart["name"],
            "Version": chart["version"],
            "AppVersion": chart["appVersion"],
        },
    }
    renderer = Renderer()
    for helper in sorted((CHART / "templates").glob("_*.tpl")):
        renderer.load_helpers(helper.read_text())
    manifests = []
    for template in sorted((CHART / "templates").glob("*.yaml")):
        text = renderer.render(template.read_text(), context)
        manifests += [doc for doc in yaml.safe_load_all(text) if doc]
    return manifests


def by_kind(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = {m["kind"]: m for m in manifests}
    assert len(kinds) == len(manifests), "one manifest of each kind"
    return kinds
