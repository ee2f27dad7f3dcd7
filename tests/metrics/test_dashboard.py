"""deploy/grafana/gitreg-dashboard.json: importable, and every query names only
metrics gitreg exports (a renamed metric must not leave an empty panel)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gitreg.metrics import registry as metrics_registry

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gitreg-dashboard.json"
# What the text format adds to a family's name for its samples.
_SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def _families() -> set[str]:
    """The family names gitreg defines (counters without `_total`)."""
    return {m.name for family in metrics_registry.REGISTERED for m in family.describe()}


def _metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects: label matchers, `by (...)`
    groupings, ranges and function calls removed, what is left are names."""
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without)\s*\([^)]*\)", " ", expr)
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return {n for n in names if not n.isdigit()}


def test_dashboard_is_importable_and_covers_the_operators_questions() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] == "gitreg"
    assert isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"type", "title", "gridPos", "targets", "datasource"} <= panel.keys()
        assert panel["targets"] and all(t["expr"] and t["refId"] for t in panel["targets"])
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in (
        "requests", "latency", "error ratio", "webhook", "queue depth", "job results",
        "publishes", "mirror hit ratio", "upstream errors", "evictions", "failed auth",
    ):  # fmt: skip
        assert topic in titles, topic


def test_every_expression_names_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    families = _families()
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in _metric_names(target["expr"])
    }
    bases = set()
    for name in used:
        base = next((name[: -len(s)] for s in _SUFFIXES if name.endswith(s)), name)
        assert base in families or name in families, f"{name} is not a metric gitreg exports"
        bases.add(base if base in families else name)
    # And the other way round: every metric gitreg exports has a panel.
    assert families <= bases, sorted(families - bases)


def test_the_expression_reader_finds_names_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (route, le) (rate(gitreg_x_bucket{status=~"5.."}[5m])))'
        " / sum(gitreg_y)"
    )
    assert _metric_names(expr) == {"gitreg_x_bucket", "gitreg_y"}
