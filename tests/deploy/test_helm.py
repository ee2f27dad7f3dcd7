"""deploy/helm/gitreg rendered for the default, single-replica and scale-out
values, every manifest validated offline against the Kubernetes schemas that
`kubernetes-validate` ships, and the refusals of values that cannot work."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from dockerfile_parse import DockerfileParser

from gitreg.settings import ENV_PREFIX, NOT_SETTINGS, Settings, load_settings
from tests.deploy.gotemplate import TemplateFail
from tests.deploy.helm_chart import CHART, by_kind, render

SETTING_NAMES = {
    ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Settings) if f.name not in NOT_SETTINGS
}
KUBERNETES = kubernetes_validate.latest_version()

SINGLE = {
    "publicUrl": "https://registry.acme.test",
    "image": {"tag": "0.1.0-rc1"},
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "host": "registry.acme.test",
        "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"},
    },
    "persistence": {"size": "50Gi", "storageClass": "fast"},
    "extraEnv": [{"name": "GITREG_READ_DEFAULT", "value": "token"}],
    "serviceMonitor": {"enabled": True, "bearerTokenSecret": {"name": "gitreg-metrics"}},
}
SCALE_OUT = {
    "replicaCount": 3,
    "publicUrl": "https://registry.acme.test",
    "ingress": {"enabled": True, "host": "registry.acme.test"},
    "secretKey": {"existingSecret": "gitreg-key"},
    "database": {
        "url": "postgresql://gitreg@db.acme.test:5432/gitreg",
        "existingSecret": "gitreg-db",
    },
    "blobStore": {
        "url": "s3://acme-registry/gitreg",
        "addressing": "path",
        "region": "eu-west-1",
        "endpoint": "https://s3.acme.test",
        "existingSecret": "gitreg-s3",
    },
}


def _validated(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    manifests = by_kind(render(values))
    for kind, manifest in manifests.items():
        if kind == "ServiceMonitor":
            continue  # a CRD: checked against the Service below, not in the schemas
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
    return manifests


def _container(manifests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    containers = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["gitreg"]
    return dict(containers[0])


def _settings_env(container: dict[str, Any]) -> dict[str, str]:
    """The literal GITREG_* and AWS_* values, checked by gitreg's own settings loader."""
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    unknown = {name for name in env if name.startswith(ENV_PREFIX)} - SETTING_NAMES
    assert not unknown, f"not gitreg settings: {unknown}"
    load_settings(environ={"GITREG_DATA_DIR": "/var/lib/gitreg", **env})
    return env


def test_default_values_render_one_replica_on_a_volume() -> None:
    manifests = _validated({})
    assert set(manifests) == {
        "Deployment",
        "Service",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
    }
    spec = manifests["Deployment"]["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert (
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
        == (manifests["PersistentVolumeClaim"]["metadata"]["name"])
    )
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = _container(manifests)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/var/lib/gitreg"}]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = _settings_env(container)
    assert env["GITREG_NO_TLS"] == "true" and env["GITREG_PORT"] == "8080"
    assert container["ports"][0]["containerPort"] == 8080
    service = manifests["Service"]["spec"]
    assert service["selector"].items() <= spec["template"]["metadata"]["labels"].items()


def test_single_replica_with_ingress_tls_and_a_service_monitor() -> None:
    manifests = _validated(SINGLE)
    ingress = manifests["Ingress"]["spec"]
    assert ingress["tls"] == [{"hosts": ["registry.acme.test"], "secretName": "gitreg-tls"}]
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": manifests["Service"]["metadata"]["name"], "port": {"name": "http"}}
    assert manifests["PersistentVolumeClaim"]["spec"]["storageClassName"] == "fast"
    container = _container(manifests)
    assert container["image"] == "ghcr.io/gitreg/gitreg:0.1.0-rc1"
    assert _settings_env(container)["GITREG_READ_DEFAULT"] == "token"
    monitor = manifests["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    service = manifests["Service"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenSecret"] == {"name": "gitreg-metrics", "key": "token"}


def test_scale_out_values_render_replicas_on_postgres_and_s3() -> None:
    manifests = _validated(SCALE_OUT)
    assert "PersistentVolumeClaim" not in manifests
    spec = manifests["Deployment"]["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = spec["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["data"]
    container = _container(manifests)
    env = _settings_env(container)
    assert (
        env["GITREG_S3_ADDRESSING"] == "path" and env["AWS_ENDPOINT_URL"] == "https://s3.acme.test"
    )
    from_secrets = {
        e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e
    }
    assert from_secrets == {
        "PGPASSWORD": {"name": "gitreg-db", "key": "password"},
        "AWS_ACCESS_KEY_ID": {"name": "gitreg-s3", "key": "access-key-id"},
        "AWS_SECRET_ACCESS_KEY": {"name": "gitreg-s3", "key": "secret-access-key"},
    }
    # The key file gitreg reads is the 0600 copy the init container makes.
    key_file = Path(env["GITREG_SECRET_KEY_FILE"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["secret-key"] == str(key_file.parent)
    (init,) = pod["initContainers"]
    assert init["command"][:3] == ["install", "-m", "0600"] and init["command"][-1] == str(key_file)
    assert volumes["secret-key-source"]["secret"]["secretName"] == "gitreg-key"
    assert volumes["secret-key"]["emptyDir"]["medium"] == "Memory"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": 2}, "replicaCount > 1 needs database.url"),
        ({**SCALE_OUT, "blobStore": {"url": ""}}, "replicaCount > 1 needs"),
        ({**SCALE_OUT, "secretKey": {"existingSecret": ""}}, "replicaCount > 1 needs"),
        ({"database": {"url": "postgresql://gitreg@db/gitreg"}}, "database.url needs secretKey"),
    ],
)
def test_the_chart_refuses_values_that_cannot_work(values: dict[str, Any], message: str) -> None:
    with pytest.raises(TemplateFail, match=message.replace(".", r"\.")):
        render(values)


def test_an_invalid_manifest_fails_validation() -> None:
    # Guards the tests above: the schemas really are loaded and strict.
    manifests = by_kind(render({"service": {"port": "eighty"}}))
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifests["Service"], KUBERNETES, strict=True)
    deployment = manifests["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["unknownField"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


def test_the_chart_matches_the_image() -> None:
    # The uid the image runs as and the data volume it declares (deploy/Dockerfile).
    image = DockerfileParser(str(CHART.parents[1] / "Dockerfile"))
    uid = next(i["value"] for i in image.structure if i["instruction"] == "USER").split(":")[0]
    manifests = by_kind(render(SCALE_OUT))
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    container = _container(manifests)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["data"] == image.envs["GITREG_DATA_DIR"]
    (init,) = pod["initContainers"]
    assert init["image"] == container["image"]
    assert container["args"] == ["serve"] and "command" not in container  # keeps the entrypoint
