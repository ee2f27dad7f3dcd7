"""deploy/compose.yml and deploy/compose.scale-out.yml, read as compose reads
them (PyYAML, merge keys, `${VAR}` interpolation) and checked against gitreg's
real settings: every GITREG_* name is a Settings field, and each gitreg
service's environment loads with `load_settings`, as the container would."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from gitreg.settings import ENV_PREFIX, NOT_SETTINGS, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
HOSTNAME = "registry.example.com"
SETTING_NAMES = {
    ENV_PREFIX + f.name.upper() for f in dataclasses.fields(Settings) if f.name not in NOT_SETTINGS
}


def _entrypoint_files() -> set[str]:
    """Variables the image's entrypoint turns from NAME_FILE into NAME."""
    script = (DEPLOY / "docker-entrypoint.sh").read_text()
    loop = re.search(r"for name in ([A-Z_ ]+); do", script)
    assert loop, "docker-entrypoint.sh has no `for name in ...; do` loop"
    return set(loop.group(1).split())


ENTRYPOINT_FILES = _entrypoint_files()
SECRET_VALUE = re.compile(r"PASSWORD|SECRET_ACCESS_KEY|TOKEN")


def _interpolate(text: str) -> str:
    """Compose's `${NAME}`, `${NAME:?message}` with GITREG_HOSTNAME set; `$$` is a `$`."""

    def value(match: re.Match[str]) -> str:
        assert match.group(1) == "GITREG_HOSTNAME", f"unexpected variable {match.group(0)}"
        return HOSTNAME

    return re.sub(r"\$\{([A-Z_]+)(?::\?[^}]*)?\}", value, text).replace("$$", "$")


def _compose(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load(_interpolate((DEPLOY / name).read_text()))
    assert isinstance(loaded, dict)
    return loaded


def _gitreg_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if s.get("image", "").startswith("gitreg")}


IMAGE_ENV: dict[str, str] = dict(DockerfileParser(str(DEPLOY / "Dockerfile")).envs)


def _data_dir() -> str:
    return IMAGE_ENV["GITREG_DATA_DIR"]


@pytest.mark.parametrize("name", ["compose.yml", "compose.scale-out.yml"])
def test_gitreg_services_use_real_settings_only(name: str) -> None:
    services = _gitreg_services(_compose(name))
    assert services
    for service in services.values():
        env = {k: str(v) for k, v in service["environment"].items()}
        unknown = {k for k in env if k.startswith(ENV_PREFIX)} - SETTING_NAMES
        assert not unknown, f"{name}: not gitreg settings: {unknown}"
        files = {k.removesuffix("_FILE") for k in env if k.endswith("_FILE")}
        assert files - {"GITREG_SECRET_KEY"} <= ENTRYPOINT_FILES
        for key in env:
            if SECRET_VALUE.search(key) and not key.endswith("_FILE"):
                pytest.fail(f"{name}: {key} holds a secret in the environment; use {key}_FILE")
        # The values load as gitreg would load them in the container, whose
        # image sets GITREG_DATA_DIR and the rest of the Dockerfile's ENV.
        settings = load_settings(environ={**IMAGE_ENV, **env})
        assert urlsplit(settings.database_url).password is None
        assert settings.no_tls and settings.trust_forwarded
        assert settings.public_url == f"https://{HOSTNAME}"
        assert settings.data_dir == Path(_data_dir())
        assert service["read_only"] is True
        assert any(v.endswith(":" + _data_dir()) for v in service["volumes"])


def _caddy_upstreams(compose: dict[str, Any]) -> list[str]:
    caddy = compose["services"]["caddy"]
    assert caddy["environment"]["GITREG_HOSTNAME"] == HOSTNAME
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    return str(caddy["environment"]["GITREG_UPSTREAMS"]).split()


def test_caddy_proxies_to_every_gitreg_service_on_its_port() -> None:
    caddyfile = (DEPLOY / "Caddyfile").read_text()
    assert "{$GITREG_HOSTNAME} {" in caddyfile and "reverse_proxy {$GITREG_UPSTREAMS}" in caddyfile
    for name in ("compose.yml", "compose.scale-out.yml"):
        compose = _compose(name)
        expected = [
            f"{service}:{config['environment']['GITREG_PORT']}"
            for service, config in _gitreg_services(compose).items()
        ]
        assert _caddy_upstreams(compose) == expected
        assert {"80:80", "443:443"} <= set(compose["services"]["caddy"]["ports"])


def test_scale_out_runs_three_identical_replicas_on_postgres_and_s3() -> None:
    compose = _compose("compose.scale-out.yml")
    replicas = _gitreg_services(compose)
    assert sorted(replicas) == ["gitreg-1", "gitreg-2", "gitreg-3"]
    environments = [r["environment"] for r in replicas.values()]
    assert all(env == environments[0] for env in environments)
    settings = load_settings(environ={**IMAGE_ENV, **environments[0]})
    assert settings.database_url.startswith("postgresql://gitreg@postgres:5432/")
    assert settings.blob_store.startswith("s3://registry/") and settings.s3_addressing == "path"
    # Each replica keeps its own data dir (git mirrors, scratch), never a shared one.
    volumes = [r["volumes"][0].split(":")[0] for r in replicas.values()]
    assert len(set(volumes)) == 3 and set(volumes) <= set(compose["volumes"])
    assert environments[0]["AWS_ENDPOINT_URL"] == "http://minio:9000"


def test_every_secret_file_is_a_declared_compose_secret() -> None:
    compose = _compose("compose.scale-out.yml")
    declared = set(compose["secrets"])
    for name, service in compose["services"].items():
        mounted = set(service.get("secrets", []))
        assert mounted <= declared, name
        for key, value in service.get("environment", {}).items():
            if key.endswith("_FILE"):
                assert str(value).removeprefix("/run/secrets/") in mounted, (name, key)
    minio = compose["services"]["minio"]["environment"]
    postgres = compose["services"]["postgres"]["environment"]
    gitreg = compose["services"]["gitreg-1"]["environment"]
    # The same secret on both ends of each connection.
    assert minio["MINIO_ROOT_PASSWORD_FILE"] == gitreg["AWS_SECRET_ACCESS_KEY_FILE"]
    assert minio["MINIO_ROOT_USER"] == gitreg["AWS_ACCESS_KEY_ID"]
    assert postgres["POSTGRES_PASSWORD_FILE"] == gitreg["PGPASSWORD_FILE"]
    bucket = gitreg["GITREG_BLOB_STORE"].removeprefix("s3://").split("/")[0]
    assert f"local/{bucket}" in compose["services"]["minio-bucket"]["command"][0]
