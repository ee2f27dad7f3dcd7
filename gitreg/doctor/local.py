"""Checks of this machine's own state: data dir, disk, TLS certificate, schema,
blob store. Each is one function returning a `CheckResult`."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import stat
from typing import TYPE_CHECKING

from gitreg.doctor.results import CheckResult, fail, ok, warn
from gitreg.errors import GitregError
from gitreg.settings import SERVER_CERT_NAME, Settings
from gitreg.storage.blobs import BlobStore
from gitreg.storage.schema_status import SchemaStatus, schema_status

if TYPE_CHECKING:  # imported by the check: every command's parser, `serve`'s too,
    # loads this module, and the server keeps cryptography (gitreg.server.tls) out
    # of its memory (docs/performance.md, "Memory of one worker")
    from cryptography import x509

# A certificate expiring sooner than this is worth renewing now.
EXPIRY_WARNING = datetime.timedelta(days=14)


def check_settings(settings: Settings) -> CheckResult:
    """Names in the config file or the environment that are no setting: every
    other command stops at the first one; the doctor lists them all."""
    if settings.unknown_settings:
        return fail("settings", "; ".join(settings.unknown_settings))
    where = f"{settings.config_file} and " if settings.config_file else ""
    return ok("settings", f"every name in {where}the GITREG_* variables is a setting")


def check_data_dir(settings: Settings) -> CheckResult:
    name, path = "data_dir", settings.data_dir
    try:
        info = path.stat()
    except FileNotFoundError:
        return fail(name, f"{path} does not exist: create it with `install -d -m 700 {path}`")
    except OSError as exc:
        return fail(name, f"cannot read {path}: {exc.strerror}")
    if not stat.S_ISDIR(info.st_mode):
        return fail(name, f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        return fail(name, f"{path} belongs to uid {info.st_uid}, not to the user running gitreg")
    if not os.access(path, os.W_OK | os.X_OK):
        return fail(name, f"{path} is not writable by this user: `chmod u+rwx {path}`")
    mode = stat.S_IMODE(info.st_mode)
    # Others writing there could replace archives or the index.
    if mode & 0o022:
        return fail(name, f"{path} is writable by group/others ({mode:o}): `chmod go-w {path}`")
    if mode & 0o077:
        return warn(
            name, f"{path} is readable by group/others ({mode:o}): `chmod 700 {path}` if unintended"
        )
    return ok(name, f"{path} is owned by this user, mode {mode:o}")


def check_free_space(settings: Settings) -> CheckResult:
    name = "free_space"
    try:
        free = shutil.disk_usage(settings.data_dir).free
    except OSError as exc:
        return fail(name, f"cannot measure free space in {settings.data_dir}: {exc.strerror}")
    want = settings.min_free_bytes
    mib = f"{free // 2**20} MiB free, min_free_bytes is {want // 2**20} MiB"
    if free < want:
        return fail(name, f"{mib}: /readyz answers 503 and publishes fail; free space or grow it")
    if free < 2 * want:
        return warn(name, f"{mib}: less than twice the minimum left")
    return ok(name, mib)


def _covers(cert: x509.Certificate, host: str) -> bool:
    from cryptography import x509

    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False  # clients ignore the common name since RFC 6125
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return address in sans.get_values_for_type(x509.IPAddress)
    host = host.lower().rstrip(".")
    for pattern in sans.get_values_for_type(x509.DNSName):
        pattern = pattern.lower().rstrip(".")
        if pattern == host:
            return True
        # A wildcard covers exactly one left-most label.
        if pattern.startswith("*.") and host.split(".", 1)[-1] == pattern[2:] and "." in host:
            return True
    return False


def check_tls(settings: Settings, now: datetime.datetime | None = None) -> CheckResult:
    name = "tls"
    if settings.no_tls:
        return ok(name, "TLS is off (no_tls): the proxy in front must terminate it")
    path = settings.tls_cert or settings.tls_dir / SERVER_CERT_NAME
    if settings.tls_cert is None and not path.is_file():
        return ok(name, f"the local CA will issue {path} when `gitreg serve` starts")
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        return fail(name, f"cannot read the certificate {path}: {exc}")
    moment = now or datetime.datetime.now(datetime.UTC)
    until = cert.not_valid_after_utc
    if until <= moment:
        return fail(name, f"{path} expired on {until:%Y-%m-%d}: renew it")
    if cert.not_valid_before_utc > moment:
        return fail(name, f"{path} is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M}")
    host = settings.public_host or settings.host
    if not _covers(cert, host):
        return fail(
            name, f"{path} does not name {host} (public_url): clients will refuse it; reissue it"
        )
    if until - moment < EXPIRY_WARNING:
        return warn(name, f"{path} expires on {until:%Y-%m-%d}: renew it soon")
    return ok(name, f"{path} covers {host}, valid until {until:%Y-%m-%d}")


def check_schema(settings: Settings) -> tuple[CheckResult, SchemaStatus | None]:
    name = "schema"
    try:
        status = schema_status(settings.database_url, settings.db_path)
    except GitregError as exc:
        return fail(name, f"cannot read the schema: {exc}"), None
    return _schema_result(name, status), status


def _schema_result(name: str, status: SchemaStatus) -> CheckResult:
    if status.unknown:
        return fail(
            name,
            f"the index at {status.where} was upgraded by a newer gitreg"
            f" (migrations {', '.join(status.unknown)}): upgrade gitreg on this machine",
        )
    if not status.exists:
        return ok(name, f"no index at {status.where} yet: gitreg creates it on first use")
    if status.missing:
        return warn(
            name,
            f"the index at {status.where} lacks {len(status.missing)} migration(s) of this"
            " gitreg: they are applied when it next starts; replicas on the older"
            " version must be upgraded together",
        )
    return ok(name, f"the index at {status.where} has this gitreg's schema")


def check_blob_store(blobs: BlobStore, where: str) -> CheckResult:
    name = "blob_store"
    try:
        blobs.check_writable(probe_bytes=4096)
    except (GitregError, OSError) as exc:
        return fail(name, f"cannot write to {where}: {exc}")
    return ok(name, f"{where} is writable")
