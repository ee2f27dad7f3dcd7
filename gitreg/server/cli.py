"""`gitreg serve`: HTTPS by default, with a local CA when no certificate is given."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitreg import logs
from gitreg.errors import ConfigError, DatabaseUnavailable
from gitreg.settings import ENV_PREFIX, NOT_SETTINGS, SECTIONS, Settings, metrics_address

if TYPE_CHECKING:
    from gitreg.server.limits import ConnectionLimits

# uvicorn and the app are imported by `serve` itself: every other command builds
# this parser too and should not pay for importing the HTTP stack.

Parser = argparse.ArgumentParser

# Names that mean "every interface" are no hostname a certificate can carry.
_WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104


def _local_tls(tls_dir: Path, names: list[str]) -> tuple[str, str, str]:
    """In the child: make or reuse the local CA and certificate; plain strings back."""
    from gitreg.server.tls import describe_trust, ensure_local_tls

    tls = ensure_local_tls(tls_dir, names)
    return str(tls.cert), str(tls.key), describe_trust(tls)


def _tls_options(settings: Settings) -> dict[str, Any]:
    if settings.no_tls:
        return {}
    if settings.tls_cert and settings.tls_key:
        return {"ssl_certfile": str(settings.tls_cert), "ssl_keyfile": str(settings.tls_key)}
    names = [h for h in (settings.public_host, settings.host) if h not in _WILDCARDS]
    # Certificates are made in a short-lived child process, so the server never
    # keeps the `cryptography` package in memory (RSS target, docs/performance.md).
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        cert, key, trust = pool.apply(_local_tls, (settings.tls_dir, names))
    logs.announce(trust, prefix="")
    return {"ssl_certfile": cert, "ssl_keyfile": key}


def _open_storage(settings: Settings) -> None:
    """In the child: open the index and the secret store once, and close them."""
    from gitreg.services import build_services

    build_services(settings).close()


def _check_storage(settings: Settings) -> None:
    """Before `--workers N` starts: a storage error found at start-up (a secret
    key that does not match the database) stops `serve` with one line, instead
    of every worker dying with a traceback and being restarted forever. Done
    in a short-lived child, like the certificates, so this process loads
    neither the storage nor `cryptography`. A database that is down is no such
    error: each worker waits for it (gitreg/api/startup.py)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        try:
            pool.apply(_open_storage, (settings,))
        except DatabaseUnavailable as exc:
            if not settings.database_url:
                raise
            logging.getLogger("gitreg.startup").warning("%s; the workers wait for it", exc)


def _export_settings(settings: Settings) -> None:
    """Worker processes rebuild Settings from the environment (uvicorn's factory),
    so each parses the same tables from the same file."""
    if settings.config_file is not None:  # the tables only the file has
        os.environ[ENV_PREFIX + "CONFIG"] = str(settings.config_file)
    for name, value in vars(settings).items():
        if name in NOT_SETTINGS or name in SECTIONS or value is None:
            continue
        os.environ[ENV_PREFIX + name.upper()] = (
            str(value).lower() if isinstance(value, bool) else str(value)
        )


def _connection_limits(settings: Settings) -> ConnectionLimits:
    from gitreg.server.limits import ConnectionLimits, client_share, connection_cap, raise_fd_limit

    """Raise the open-file limit, then fit the connection cap under it."""
    fd_limit = raise_fd_limit()
    cap = connection_cap(settings.max_connections, fd_limit)
    logs.announce(
        f"at most {cap} connections per process (open-file limit {fd_limit}); "
        f"request heads and TLS handshakes must finish within {settings.header_timeout:g}s"
    )
    share = client_share(settings.max_connections_per_client, cap, settings.trust_forwarded)
    return ConnectionLimits(cap, settings.header_timeout, max_per_client=share)


def _multiprocess_metrics(settings: Settings) -> None:
    """With several workers each writes its metrics to files in one directory
    that a scrape sums (gitreg/metrics/service.py). prometheus_client reads the
    variable when it is imported, so it is set before any worker starts.
    Emptied at every start: files of an earlier run's workers would be
    counted again."""
    if settings.workers <= 1:
        return
    path = settings.data_dir / "prometheus-multiproc"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)


def _metrics_listener(settings: Settings) -> None:
    """`--metrics-listen HOST:PORT`: /metrics on a plain-HTTP listener of its
    own, without a token, for a port only the monitoring network reaches.
    Served by this process; with several workers it sums their files."""
    if not settings.metrics_listen:
        return
    from prometheus_client import start_http_server

    from gitreg.metrics import service as metrics

    host, port = metrics_address(settings.metrics_listen)
    try:
        start_http_server(port, host, registry=metrics.registry())
    except OSError as exc:
        raise ConfigError(f"metrics_listen {settings.metrics_listen}: {exc.strerror}") from exc
    logs.announce(f"metrics at http://{settings.metrics_listen}/metrics")


def _check_listen(host: str, port: int) -> None:
    """Bind the address as uvicorn will, and let go: a port in use (or one this
    user may not bind) stops `serve` with one line saying so, before it
    announces anything. uvicorn itself would fail only after gitreg's start-up
    lines had said "serving"."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {where}: {exc.strerror}") from exc
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise ConfigError(f"cannot listen on {where}: {exc.strerror}") from exc


def serve(settings: Settings) -> int:
    # First: every line from here on, an error's included, is in the log format.
    logs.configure(settings.log_format, settings.log_level)
    _check_listen(settings.host, settings.port)
    _multiprocess_metrics(settings)
    import uvicorn

    from gitreg.app import create_app
    from gitreg.server.limits import limit_malloc_arenas, uvicorn_options

    limit_malloc_arenas()

    if settings.workers > 1:
        _check_storage(settings)
    _metrics_listener(settings)
    limits = _connection_limits(settings)
    options = _tls_options(settings)
    shown = settings.public_url or f"{settings.scheme}://{settings.host}:{settings.port}"
    logs.announce(f"data dir {settings.data_dir}")
    logs.announce(f"serving {shown} (discovery at {shown}/.well-known/terraform.json)")
    common: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        # gitreg writes its own access line (gitreg/server/access_log.py), and its
        # logging setup, not uvicorn's, formats uvicorn's other lines.
        "access_log": False,
        "log_config": None,
        "server_header": False,
        "proxy_headers": settings.trust_forwarded,
        "forwarded_allow_ips": "*" if settings.trust_forwarded else None,
        "timeout_graceful_shutdown": 10,
        # gitreg has no WebSocket routes; an upgrade would also escape the
        # request-head deadline, so it is answered as plain HTTP.
        "ws": "none",
        **uvicorn_options(limits, settings.http_impl),
        **options,
    }
    if settings.workers > 1:
        _export_settings(settings)
        uvicorn.run(
            "gitreg.app:app_from_environment", factory=True, workers=settings.workers, **common
        )
    else:
        uvicorn.run(create_app(settings), **common)
    sys.stdout.flush()
    return 0


def _serve_command(args: argparse.Namespace, settings: Settings) -> int:
    """`serve` builds no Services: the app opens its own per worker process."""
    return serve(settings)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: Parser) -> None:
    """Add `serve`; it runs as a `standalone` command, before any Services exist.

    Its flags are read by `gitreg.cli._settings` into Settings (docs/configuration.md).
    """
    parser = sub.add_parser("serve", parents=[common], help="run the registry")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--public-url", help="URL Terraform users reach gitreg at")
    parser.add_argument("--tls-cert", type=Path)
    parser.add_argument("--tls-key", type=Path)
    parser.add_argument(
        "--no-tls",
        action="store_true",
        default=None,
        help="plain HTTP, for running behind a TLS-terminating proxy",
    )
    parser.add_argument(
        "--trust-forwarded",
        action="store_true",
        default=None,
        help="honour X-Forwarded-Proto/Host (only behind your own proxy)",
    )
    parser.add_argument("--workers", type=int)
    parser.add_argument("--job-workers", type=int, help="threads running webhook jobs (0: none)")
    parser.add_argument(
        "--reconcile-interval", type=float, help="seconds between remote tag checks (0: off)"
    )
    parser.add_argument(
        "--yank-deleted-tags",
        action="store_true",
        default=None,
        help="yank a version when its tag is deleted upstream",
    )
    parser.add_argument("--log-level")
    parser.add_argument("--log-format", choices=["auto", "json", "text"])
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve /metrics there, plain HTTP without a token (and not on the main port)",
    )
    parser.add_argument(
        "--upstream",
        action="append",
        metavar="HOSTNAME=BASE_URL",
        help="mirror: fetch HOSTNAME's providers from BASE_URL (repeatable)",
    )
    parser.set_defaults(standalone=_serve_command)
