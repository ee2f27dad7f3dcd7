"""One `Settings` object, read once from flags, `GITREG_*` variables and a TOML file.

Precedence, highest first: command-line flags, environment variables, the config
file (`--config`, `$GITREG_CONFIG`, or `<data-dir>/gitreg.toml` when present),
built-in defaults. docs/configuration.md lists every key.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gitreg.errors import ConfigError

ENV_PREFIX = "GITREG_"


@dataclass(frozen=True)
class Settings:
    """Everything gitreg can be told. Field names are the TOML keys; env vars are
    `GITREG_` + the upper-cased name."""

    data_dir: Path = Path("gitreg-data")
    host: str = "127.0.0.1"
    port: int = 8443
    # The URL Terraform users reach this registry at; absolute download URLs are
    # built from it (Terragrunt and Infracost do not resolve relative ones).
    public_url: str = ""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    no_tls: bool = False
    # Honour X-Forwarded-Proto/Host only behind a proxy the operator names.
    trust_forwarded: bool = False
    # Remotes: local paths and file:// are operator-registered, so allowed unless
    # turned off; plain http:// is refused unless allowed (checklist G2).
    allow_local_remotes: bool = True
    allow_http_remotes: bool = False
    git_timeout: float = 120.0
    max_archive_bytes: int = 256 * 1024 * 1024
    max_archive_files: int = 20_000
    max_file_bytes: int = 64 * 1024 * 1024
    # How often the server notices writes made by other processes (CLI, workers).
    refresh_interval: float = 0.25
    log_level: str = "info"
    workers: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return "http" if self.no_tls else "https"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "index.sqlite3"

    @property
    def blob_dir(self) -> Path:
        return self.data_dir / "blobs"

    @property
    def git_dir(self) -> Path:
        return self.data_dir / "git"

    @property
    def tls_dir(self) -> Path:
        return self.data_dir / "tls"

    @property
    def public_host(self) -> str:
        """The hostname of `public_url` (empty when it is unset)."""
        return urlsplit(self.public_url).hostname or ""


_FIELDS = {f.name: f for f in dataclasses.fields(Settings) if f.name != "extra"}


def _coerce(name: str, value: Any) -> Any:
    """Turn a string (env) or TOML value into the field's type, with a clear error."""
    kind = str(_FIELDS[name].type)
    try:
        if "Path" in kind:
            return None if value in ("", None) else Path(str(value)).expanduser()
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"expected true/false, got {value!r}")
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"setting {name}: {exc}") from exc


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    return {
        name: _coerce(name, environ[ENV_PREFIX + name.upper()])
        for name in _FIELDS
        if ENV_PREFIX + name.upper() in environ
    }


def _from_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Known keys become fields; other tables (e.g. `[upstreams]`) stay in `extra`."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    known = {k.replace("-", "_"): v for k, v in raw.items() if k.replace("-", "_") in _FIELDS}
    extra = {k: v for k, v in raw.items() if k.replace("-", "_") not in _FIELDS}
    return {k: _coerce(k, v) for k, v in known.items()}, extra


def load_settings(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Merge defaults < config file < environment < flags (None flags are unset)."""
    env = os.environ if environ is None else environ
    from_flags = {k: v for k, v in (flags or {}).items() if v is not None and k in _FIELDS}
    from_env = _from_env(env)
    data_dir = Path(from_flags.get("data_dir") or from_env.get("data_dir") or Settings.data_dir)
    if config_file is None and env.get(ENV_PREFIX + "CONFIG"):
        config_file = Path(env[ENV_PREFIX + "CONFIG"])
    if config_file is None and (data_dir / "gitreg.toml").is_file():
        config_file = data_dir / "gitreg.toml"
    from_file: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    if config_file is not None:
        from_file, extra = _from_file(config_file)
    merged: dict[str, Any] = {**from_file, **from_env, **from_flags}
    merged["data_dir"] = Path(merged.get("data_dir") or Settings.data_dir).expanduser().absolute()
    settings = Settings(**merged, extra=extra)
    _validate(settings)
    return settings


def _validate(settings: Settings) -> None:
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"public_url must be an http(s) URL, got {settings.public_url!r}")
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    if not 0 < settings.port < 65536:
        raise ConfigError(f"port must be 1-65535, got {settings.port}")
