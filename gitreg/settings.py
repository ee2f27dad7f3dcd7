"""One `Settings` object, read once from flags, `GITREG_*` variables and a TOML file.

Precedence, highest first: command-line flags, environment variables, the config
file (`--config`, `$GITREG_CONFIG`, or `<data-dir>/gitreg.toml` when present),
built-in defaults. docs/configuration.md lists every key.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gitreg import setting_names
from gitreg.auth.grants import Grant, parse_grants
from gitreg.errors import ConfigError
from gitreg.mirror.upstreams import parse_upstreams
from gitreg.module_proxy.config import ProxyUpstream, parse_module_proxy
from gitreg.numbers import plain_int
from gitreg.providers.forge_config import ForgeConfig, parse_forges
from gitreg.setting_names import ENV_PREFIX as ENV_PREFIX
from gitreg.setting_names import KeyCheck, KeyCollector, refuse_unknown_keys
from gitreg.workload_identity.config import TrustedIssuer, parse_workload_identity

# `http_impl`: uvicorn's HTTP parser and event loop (gitreg/server/limits.py).
HTTP_IMPLS = ("auto", "httptools", "h11")
# The local CA's files in `Settings.tls_dir`: `serve` issues them (gitreg/server/tls.py)
# and `doctor` reads them.
CA_CERT_NAME = "ca.pem"
CA_KEY_NAME = "ca-key.pem"
SERVER_CERT_NAME = "server.pem"
SERVER_KEY_NAME = "server-key.pem"

T = TypeVar("T")
_PARSER = "parser"


def section(parse: Callable[[object, KeyCheck], T]) -> T:
    """A table of the config file as a field of `Settings`, named as the table.
    `parse(raw, keys)` gets the table as TOML gives it (None when absent),
    reports each entry's keys to `keys`, and returns the typed value or raises
    ConfigError; `load_settings` calls it once (docs/architecture.md, "Settings")."""
    return field(
        default_factory=lambda: parse(None, refuse_unknown_keys), metadata={_PARSER: parse}
    )


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
    # turned off; plain http:// is refused unless allowed.
    allow_local_remotes: bool = True
    allow_http_remotes: bool = False
    git_timeout: float = 120.0
    max_fetch_bytes: int = 2 * 1024**3  # one fetch's pack from a network remote
    max_archive_bytes: int = 256 * 1024 * 1024
    max_archive_files: int = 20_000
    max_file_bytes: int = 64 * 1024 * 1024
    # Processes that build archives side by side when a sync needs several
    # (gitreg/modules/builds.py); 0: one per core this process may use.
    archive_workers: int = 0
    # How often the server notices writes made by other processes (CLI, workers).
    refresh_interval: float = 0.25
    # Metadata cache misses built on worker threads at once (gitreg/cache.py):
    # more only wait for a database connection, on threads that stay in RSS.
    cache_build_threads: int = 8
    # Scale-out (docs/scale-out.md): `postgresql://USER:PASS@HOST:PORT/DB` puts the
    # index and the job queue in PostgreSQL, shared by every replica; unset keeps
    # the embedded SQLite file in the data dir. Connections per server process.
    database_url: str = ""
    database_pool_size: int = 10
    log_level: str = "info"
    # "json" (one object per line), "text", or "auto": text on a terminal, JSON
    # otherwise (gitreg/logs.py, docs/operations.md).
    log_format: str = "auto"
    # gitreg's own access line (gitreg/server/access_log.py; uvicorn's is always
    # off); turn it off when a proxy already logs every request.
    access_log: bool = True
    workers: int = 1
    # Slow clients: connections per server process (0: derived from
    # the open-file limit), and seconds a client gets to finish its TLS
    # handshake and each request head; over the cap a connection gets a 503.
    max_connections: int = 0
    header_timeout: float = 15.0
    # A request body gets `header_timeout` plus 1 s per `min_body_rate` bytes
    # (gitreg/api/body_deadline.py). One client address holds at most
    # `max_connections_per_client` of the cap (0: a quarter of it, or all of it
    # with `trust_forwarded`, where every connection comes from the proxy).
    min_body_rate: int = 16 * 1024
    max_connections_per_client: int = 0
    # uvicorn's HTTP parser and event loop: "httptools" (with uvloop),
    # "h11" (with asyncio), or "auto": httptools where it imports, else h11.
    http_impl: str = "auto"
    # Webhooks and the ingestion queue (docs/webhooks.md). Secrets may be given
    # literally or as `env:NAME` / `file:/path` references, read at use time.
    webhook_secret: str = ""  # default for repositories without their own
    webhook_max_bytes: int = 5 * 1024 * 1024  # checked before parsing
    job_workers: int = 4  # job threads per server process; 0 runs none
    job_lease: float = 60.0  # seconds; renewed while a job runs
    job_max_attempts: int = 8
    job_backoff: float = 5.0  # first retry delay, doubling up to 15 minutes
    reconcile_interval: float = 300.0  # list remote tags this often; 0 = off
    yank_deleted_tags: bool = False  # a tag deleted upstream yanks its version
    # A breaking change in a minor or patch release (docs/semver-guard.md):
    # "off", "warn" (publish and label it) or "enforce" (refuse it); a
    # repository's own `--semver-check` wins.
    semver_check: str = "warn"
    # Register unknown repositories named `terraform-<SYSTEM>-<NAME>` owned by
    # one of these (comma-separated) forge owners, fetched from
    # `auto_register_remote`, a template such as `https://github.com/{forge_repo}.git`.
    auto_register_owners: str = ""
    auto_register_remote: str = ""
    # Providers (docs/providers.md). Limits stop a hostile or broken package
    # before it fills the disk or memory; forges are the `forges` table.
    max_provider_package_bytes: int = 1024 * 1024 * 1024  # one zip as uploaded
    max_provider_unpacked_bytes: int = 4 * 1024 * 1024 * 1024  # one zip unpacked
    max_provider_files: int = 1000  # entries in one zip
    forge_timeout: float = 60.0  # seconds per forge API call or asset read
    # Staged CI uploads (`POST .../uploads`) and blob temp files: byte quotas,
    # checked before and while bytes arrive, and how long an unfinished upload
    # (or an unlocked temp file) may sit idle before the cleaner removes it.
    max_staged_bytes_per_token: int = 2 * 1024**3
    max_staged_bytes: int = 10 * 1024**3  # all tokens together
    staging_ttl: float = 3600.0
    # /readyz answers 503 "storage full" below this much free space in the data dir.
    min_free_bytes: int = 256 * 1024 * 1024
    # Terraform 1.0.x cannot read Ed25519 (or any non-RSA/DSA/NIST-ECC) keys; a
    # signature by such a key is refused unless the operator says all clients are newer.
    allow_unverifiable_keys: bool = False
    # Access (docs/security.md): "public" serves namespaces not set private to
    # anyone; "token" makes every namespace not set public need a read token.
    read_default: str = "public"
    signed_url_ttl: float = 600.0  # seconds a signed download URL stays valid
    # A file with the operator's 32-byte key (64 hex characters or base64, mode
    # 0600). Set, URL-signing keys, provider key secrets and webhook secrets
    # are kept in the database sealed with it, shared by every replica;
    # unset, they stay files under the data dir.
    secret_key_file: Path | None = None
    auth_fail_limit: int = 10  # failed authentications per client per window
    auth_fail_window: float = 60.0
    # Provider network mirror (docs/mirror.md). Lists are comma-separated (or
    # TOML arrays). `upstream` maps provider hostnames to other base URLs,
    # `HOST=https://URL,...` (also an `[upstreams]` table); `mirror_allow` lists
    # `HOST/NAMESPACE/TYPE` globs that may be pulled through (SSRF guard).
    upstream: str = ""
    mirror_allow: str = "registry.terraform.io/*/*"
    mirror_platforms: str = "linux_amd64,linux_arm64,darwin_amd64,darwin_arm64,windows_amd64"
    mirror_hostnames: str = ""  # more names gitreg's own providers are mirrored under
    mirror_index_ttl: float = 600.0  # seconds an upstream version list is reused as is
    mirror_stale_if_error: float = 7 * 86400.0  # serve an older list while upstream fails
    mirror_connect_timeout: float = 10.0
    mirror_read_timeout: float = 60.0
    mirror_total_timeout: float = 900.0  # one upstream request: slot wait and body included
    mirror_concurrency: int = 4  # requests in flight to one upstream host
    # Scale-out (docs/scale-out.md). `blob_store`: unset keeps blobs in
    # DATA_DIR/blobs; `s3://BUCKET/PREFIX` keeps them in S3, with credentials,
    # region and endpoint from the standard AWS_* variables only.
    # `s3_addressing`: "virtual" (BUCKET.host) or "path" (host/BUCKET, MinIO and
    # others). `blob_downloads`: "stream" through gitreg, or "redirect" (302 to
    # a presigned URL valid `signed_url_ttl` seconds; S3 only).
    blob_store: str = ""
    s3_addressing: str = "virtual"
    blob_downloads: str = "stream"
    # The config file's tables, each parsed by its feature (docs/configuration.md,
    # "Tables"). `[[grants]]`: permissions by sign-in group (docs/sign-in.md).
    grants: tuple[Grant, ...] = section(parse_grants)
    # `[forges.NAME]`: where provider releases are read (docs/providers.md);
    # `github` and `gitlab` unless a table of that name replaces them.
    forges: Mapping[str, ForgeConfig] = section(parse_forges)
    # `[upstreams]`: provider hostname -> base URL for the mirror (docs/mirror.md).
    upstreams: Mapping[str, str] = section(parse_upstreams)
    # `[[module_proxy]]`: the proxied registries and namespaces (docs/module-proxy.md).
    module_proxy: tuple[ProxyUpstream, ...] = section(parse_module_proxy)
    # `[[workload_identity]]`: CI issuers trusted, by rule (docs/ci.md).
    workload_identity: tuple[TrustedIssuer, ...] = section(parse_workload_identity)
    # The TOML file these settings were read from, if any; worker processes of
    # `serve --workers N` read it again for its tables.
    config_file: Path | None = None
    # What `load_settings(refuse_unknown=False)` found that is no setting
    # (gitreg/setting_names.py), for `gitreg doctor` to report.
    unknown_settings: tuple[str, ...] = ()
    # Prometheus metrics (docs/operations.md, "Metrics"): `HOST:PORT` serves
    # /metrics there, plain HTTP and without a token (and not on the main
    # listener); unset, /metrics on the main listener needs an admin token.
    # `metrics_per_module` adds the module address as a label of the download
    # and publish counters: one series per module, so off by default.
    metrics_listen: str = ""
    metrics_per_module: bool = False
    # Sign-in (docs/sign-in.md): an OpenID Connect issuer makes gitreg
    # offer `terraform login` (login.v1). The client secret may be literal or an
    # `env:NAME` / `file:/path` reference, read at use and never logged. Scopes
    # default to the three every issuer accepts; add the one that releases the
    # groups claim where the issuer needs it (`groups` for Okta). Permissions
    # come from `grants`; a login token lasts `login_token_ttl` seconds.
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = ""
    oidc_scopes: str = "openid profile email"
    oidc_groups_claim: str = "groups"
    login_token_ttl: float = 30 * 86400.0
    # A gitreg token exchanged for a CI workload's ID token (docs/ci.md) lasts
    # as long as the ID token, and at most `workload_token_ttl` seconds.
    workload_token_ttl: float = 3600.0
    # Audit log rows (docs/audit.md) older than this many days are pruned.
    audit_retention_days: float = 400.0
    # A web UI session (docs/ui.md, "Sign-in") ends `session_ttl` seconds after
    # sign-in, whatever the person does meanwhile.
    session_ttl: float = 8 * 3600.0
    # Sign-ins in flight (a `login_states` row each, written before anything
    # is known about the visitor; docs/sign-in.md, "Limits"): at most
    # `sign_in_per_client` started per client address in 10 minutes (per
    # process), and at most `sign_in_pending_max` unexpired rows in all.
    sign_in_per_client: int = 20
    sign_in_pending_max: int = 10_000
    # OCI (docs/oci.md): every module is served under `/v2/<oci_module_prefix>/`
    # and every provider under `/v2/<oci_provider_prefix>/`. With
    # `oci_module_downloads`, a module `download` answers OpenTofu 1.10 and
    # later with an `oci://` source pinned by digest instead of an archive URL.
    oci_module_prefix: str = "modules"
    oci_provider_prefix: str = "providers"
    oci_module_downloads: bool = False

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
    def secrets_dir(self) -> Path:
        return self.data_dir / "secrets"

    @property
    def tls_dir(self) -> Path:
        return self.data_dir / "tls"

    @property
    def public_host(self) -> str:
        """The hostname of `public_url` (empty when it is unset)."""
        return urlsplit(self.public_url).hostname or ""


# Fields that are not settings of their own: `config_file` is where the file
# was found (`--config`/`$GITREG_CONFIG`).
NOT_SETTINGS = ("config_file", "unknown_settings")
# The tables: name -> parser. The other settings are scalars, also read from
# `GITREG_*` variables.
SECTIONS: Mapping[str, Callable[[object, KeyCheck], Any]] = {
    f.name: f.metadata[_PARSER] for f in dataclasses.fields(Settings) if _PARSER in f.metadata
}
_FIELDS = {
    f.name: f
    for f in dataclasses.fields(Settings)
    if f.name not in NOT_SETTINGS and f.name not in SECTIONS
}


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
        if isinstance(value, list):  # a TOML array for a comma-separated list
            return ",".join(str(item) for item in value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"setting {name}: {exc}") from exc


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    return {
        name: _coerce(name, environ[ENV_PREFIX + name.upper()])
        for name in _FIELDS
        if ENV_PREFIX + name.upper() in environ
    }


def _read_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def _sections(raw: Mapping[str, Any], keys: KeyCheck) -> tuple[dict[str, Any], list[ConfigError]]:
    """Each table parsed by its section's parser, and the tables refused."""
    parsed: dict[str, Any] = {}
    refused = []
    for name, parse in SECTIONS.items():
        try:
            parsed[name] = parse(raw.get(name), keys)
        except ConfigError as exc:
            refused.append(ConfigError(str(exc), user_input=True))
    return parsed, refused


def load_settings(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    refuse_unknown: bool = True,
) -> Settings:
    """Merge defaults < config file < environment < flags (None flags are unset).

    A name in the file or a `GITREG_*` variable that is no setting raises a
    ConfigError naming it (exit 2); with `refuse_unknown=False` they are kept
    in `unknown_settings` instead. Each table is parsed here, once: a bad one
    raises a ConfigError (exit 2) unless unknown names are being kept, then
    it keeps its default, as the doctor reports the names first."""
    env = os.environ if environ is None else environ
    from_flags = {k: v for k, v in (flags or {}).items() if v is not None and k in _FIELDS}
    from_env = _from_env(env)
    data_dir = Path(from_flags.get("data_dir") or from_env.get("data_dir") or Settings.data_dir)
    if config_file is None and env.get(ENV_PREFIX + "CONFIG"):
        config_file = Path(env[ENV_PREFIX + "CONFIG"])
    if config_file is None and (data_dir / "gitreg.toml").is_file():
        config_file = data_dir / "gitreg.toml"
    raw = _read_file(config_file) if config_file is not None else {}
    in_file = {k.replace("-", "_"): v for k, v in raw.items()}
    table_keys = KeyCollector(str(config_file))
    tables, refused = _sections(in_file, table_keys)
    unknown = [
        *setting_names.in_file(raw, str(config_file), [*_FIELDS, *SECTIONS]),
        *table_keys.found,
        *setting_names.in_environment(env, raw, _FIELDS),
    ]
    if unknown and refuse_unknown:
        raise ConfigError(str(unknown[0]), user_input=True)
    if refused and not unknown:
        raise refused[0]
    from_file = {k: _coerce(k, v) for k, v in in_file.items() if k in _FIELDS}
    merged: dict[str, Any] = {**from_file, **from_env, **from_flags, **tables}
    merged["data_dir"] = Path(merged.get("data_dir") or Settings.data_dir).expanduser().absolute()
    if config_file is not None:
        merged["config_file"] = config_file.expanduser().absolute()
    settings = Settings(**merged, unknown_settings=tuple(map(str, unknown)))
    _validate(settings)
    return settings


def _validate(settings: Settings) -> None:
    if settings.database_url and settings.secret_key_file is None:
        # Without it every replica would keep its own URL-signing keys: a URL
        # signed by one would be refused by the next (docs/scale-out.md).
        raise ConfigError(
            "database_url needs secret_key_file (GITREG_SECRET_KEY_FILE): replicas share"
            " signing keys and webhook secrets through the database, sealed with that key"
        )
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"public_url must be an http(s) URL, got {settings.public_url!r}")
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    _validate_oci(settings)
    if settings.semver_check not in ("off", "warn", "enforce"):
        raise ConfigError("semver_check must be off, warn or enforce")
    if settings.read_default not in ("public", "token"):
        raise ConfigError(f"read_default must be public or token, got {settings.read_default!r}")
    if not 0 < settings.signed_url_ttl <= 900:
        raise ConfigError("signed_url_ttl must be between 1 and 900 seconds")
    if not 0 < settings.port < 65536:
        raise ConfigError(f"port must be 1-65535, got {settings.port}")
    if min(settings.max_connections, settings.max_connections_per_client) < 0:
        raise ConfigError("max_connections and max_connections_per_client must be >= 0")
    if not 0 < settings.header_timeout <= 3600 or settings.min_body_rate < 1:
        raise ConfigError("header_timeout must be > 0 and at most 3600 s, min_body_rate >= 1")
    if settings.http_impl not in HTTP_IMPLS:
        raise ConfigError(
            f"http_impl must be one of {', '.join(HTTP_IMPLS)}, got {settings.http_impl!r}"
        )
    if settings.archive_workers < 0 or settings.cache_build_threads < 1:
        raise ConfigError("archive_workers must be >= 0 and cache_build_threads >= 1")
    if settings.job_workers < 0 or settings.job_max_attempts < 1:
        raise ConfigError("job_workers must be >= 0 and job_max_attempts >= 1")
    if settings.job_lease < 1 or settings.job_backoff < 0 or settings.reconcile_interval < 0:
        raise ConfigError("job_lease must be >= 1 s; job_backoff, reconcile_interval >= 0")
    if settings.webhook_max_bytes < 1024:
        raise ConfigError("webhook_max_bytes must be at least 1024")
    if settings.auto_register_owners:
        try:
            settings.auto_register_remote.format(forge_repo="owner/repo")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"auto_register_remote: bad template ({exc})") from exc
        if "{forge_repo}" not in settings.auto_register_remote:
            raise ConfigError("auto_register_owners needs auto_register_remote with {forge_repo}")
    if settings.metrics_listen:
        metrics_address(settings.metrics_listen)
    if not 0 < settings.max_staged_bytes_per_token <= settings.max_staged_bytes:
        raise ConfigError("need 0 < max_staged_bytes_per_token <= max_staged_bytes")
    if settings.staging_ttl < 1 or settings.min_free_bytes < 0:
        raise ConfigError("staging_ttl must be >= 1 s and min_free_bytes >= 0")
    mirror_times = (
        settings.mirror_connect_timeout,
        settings.mirror_read_timeout,
        settings.mirror_total_timeout,
    )
    if min(mirror_times) <= 0 or settings.mirror_concurrency < 1:
        raise ConfigError("mirror timeouts must be > 0 and mirror_concurrency >= 1")
    if settings.mirror_index_ttl < 0 or settings.mirror_stale_if_error < 0:
        raise ConfigError("mirror_index_ttl and mirror_stale_if_error must be >= 0")
    for forge in settings.forges.values():
        forge.check_scheme(settings.allow_http_remotes)
    _validate_blob_store(settings)
    _validate_sign_in(settings)


# S3's bucket naming rules (3-63 lower-case letters, digits, dots, hyphens, a
# letter or digit at both ends): a bad name fails here, not at the first upload.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def metrics_address(listen: str) -> tuple[str, int]:
    """`metrics_listen` as (host, port): `HOST:PORT`, `[IPV6]:PORT` or `:PORT` (all interfaces)."""
    host, sep, port = listen.rpartition(":")
    number = plain_int(port, max_digits=5)
    if not sep or number is None or not 0 < number < 65536:
        raise ConfigError(f"metrics_listen must be HOST:PORT, got {listen!r}")
    return host.strip("[]") or "0.0.0.0", number  # noqa: S104 (the operator's choice)


def s3_location(blob_store: str) -> tuple[str, str]:
    """(bucket, prefix) of an `s3://BUCKET/PREFIX` setting; the prefix has no
    leading or trailing slash and may be empty."""
    parts = urlsplit(blob_store)
    if parts.scheme != "s3" or parts.query or parts.fragment:
        raise ConfigError(
            f"blob_store must be s3://BUCKET/PREFIX (or unset for DATA_DIR/blobs), "
            f"got {blob_store!r}"
        )
    if not _BUCKET_RE.match(parts.netloc):
        raise ConfigError(
            f"blob_store {blob_store!r}: {parts.netloc!r} is not a valid S3 bucket name"
        )
    return parts.netloc, parts.path.strip("/")


_OCI_PREFIX = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def _validate_oci(settings: Settings) -> None:
    prefixes = (settings.oci_module_prefix, settings.oci_provider_prefix)
    for name, prefix in zip(("oci_module_prefix", "oci_provider_prefix"), prefixes, strict=True):
        if not _OCI_PREFIX.match(prefix):
            raise ConfigError(
                f"{name} must be lower-case OCI path components such as {name.split('_')[1]}s,"
                f" got {prefix!r}"
            )
    first, second = sorted(prefixes)
    if first == second or second.startswith(first + "/"):
        raise ConfigError("oci_module_prefix and oci_provider_prefix must not contain each other")


def _validate_blob_store(settings: Settings) -> None:
    if settings.blob_store:
        s3_location(settings.blob_store)
    if settings.s3_addressing not in ("virtual", "path"):
        raise ConfigError(f"s3_addressing must be virtual or path, got {settings.s3_addressing!r}")
    if settings.blob_downloads not in ("stream", "redirect"):
        raise ConfigError(
            f"blob_downloads must be stream or redirect, got {settings.blob_downloads!r}"
        )
    if settings.blob_downloads == "redirect" and not settings.blob_store:
        raise ConfigError("blob_downloads = redirect needs an s3:// blob_store to redirect to")


def _validate_sign_in(settings: Settings) -> None:
    if not 3600 <= settings.login_token_ttl <= 400 * 86400:
        raise ConfigError("login_token_ttl must be between 3600 s and 400 days")
    if not 60 <= settings.workload_token_ttl <= 86400:
        raise ConfigError("workload_token_ttl must be between 60 s and 1 day")
    if not 1 <= settings.audit_retention_days <= 36500:
        raise ConfigError("audit_retention_days must be between 1 and 36500")
    if not 300 <= settings.session_ttl <= 30 * 86400:
        raise ConfigError("session_ttl must be between 300 s and 30 days")
    if settings.sign_in_per_client < 1 or settings.sign_in_pending_max < 1:
        raise ConfigError("sign_in_per_client and sign_in_pending_max must be at least 1")
    if not settings.oidc_issuer:
        return
    parts = urlsplit(settings.oidc_issuer)
    # Plain http only to the same machine (a test or development issuer):
    # anywhere else the id_token and the client secret would cross in clear.
    loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ConfigError(f"oidc_issuer must be an https URL, got {settings.oidc_issuer!r}")
    if parts.query or parts.fragment:
        raise ConfigError("oidc_issuer must not have a query or fragment (OpenID Discovery 4)")
    if not settings.oidc_client_id:
        raise ConfigError("oidc_issuer needs oidc_client_id (GITREG_OIDC_CLIENT_ID)")
    if "openid" not in settings.oidc_scopes.replace(",", " ").split():
        raise ConfigError("oidc_scopes must include openid")
    if not settings.oidc_groups_claim.strip():
        raise ConfigError("oidc_groups_claim must not be empty")
