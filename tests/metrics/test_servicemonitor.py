"""The Helm chart's ServiceMonitor scrapes /metrics the way gitreg serves it:
the pod's plain-HTTP main port, with an admin token from a Secret."""

from __future__ import annotations

import pytest

from tests.deploy.gotemplate import TemplateFail
from tests.deploy.helm_chart import by_kind, render


def test_the_monitor_sends_the_admin_token_to_the_main_port() -> None:
    monitor = {"enabled": True, "bearerTokenSecret": {"name": "gitreg-metrics"}}
    manifests = by_kind(render({"serviceMonitor": monitor}))
    (endpoint,) = manifests["ServiceMonitor"]["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("http", "http", "/metrics")
    assert endpoint["bearerTokenSecret"] == {"name": "gitreg-metrics", "key": "token"}
    container = manifests["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # The main port speaks plain HTTP in the pod, and /metrics is on it.
    assert env["GITREG_NO_TLS"] == "true" and "GITREG_METRICS_LISTEN" not in env


def test_a_monitor_without_a_token_is_refused() -> None:
    # Every scrape would be a 401 (gitreg/metrics/http.py).
    with pytest.raises(TemplateFail, match="bearerTokenSecret"):
        render({"serviceMonitor": {"enabled": True}})
