"""gitreg's log lines: JSON or text, with context, and nothing secret in them.

`configure(settings)` sets up the root logger once per process (the server,
each worker of `serve --workers N`, a CLI command):
- `log_format = "json"` writes one JSON object per line (`ts`, `level`,
  `logger`, `msg`, and the context fields below); `"text"` the familiar
  `time LEVEL logger: message`; `"auto"` (the default) text on a terminal and
  JSON otherwise, for log shippers.
- Context travels in context variables, so every line written while a request
  or a job runs carries its `request_id`, or its `job_id` and `repo_id`,
  whichever module writes it.
- A filter redacts what must never reach a log: the value of
  `signature=` in signed URLs, bearer credentials, gitreg API tokens, and the
  password of a URL with credentials.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
import time
from json.encoder import encode_basestring_ascii
from typing import Any, TextIO

from gitreg.errors import is_outage, operator_text

# What the current request or job is; set by the access-log middleware and the
# job runner, read by every log line written meanwhile.
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
job: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("job", default=None)

_SECRETS = (
    (re.compile(r"(signature=)[^&\s\"']+"), r"\1***"),
    (re.compile(r"(?i)(bearer\s+)[^\s\"',]+"), r"\1***"),
    (re.compile(r"gitreg_[A-Za-z0-9_-]{43}"), "gitreg_***"),
    (re.compile(r"(://[^/\s:@]*:)[^@\s/]+@"), r"\1***@"),
)
_FORMATS = ("auto", "json", "text")


def redact(text: str) -> str:
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class ContextAndRedaction(logging.Filter):
    """Adds the request or job context to a record and redacts its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        current = job.get()
        record.job_id, record.repo_id = current if current else (None, None)
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in ("request_id", "job_id", "repo_id"):
            if (value := getattr(record, name, None)) is not None:
                line[name] = value
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, separators=(",", ":"), default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = [
            f"{name}={value}"
            for name in ("request_id", "job_id", "repo_id")
            if (value := getattr(record, name, None)) is not None
        ]
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            context += [f"{k}={v}" for k, v in fields.items() if v is not None]
        text = f"{text} [{' '.join(context)}]" if context else text
        return redact(text) if record.exc_info else text


def resolve_format(configured: str, stream: TextIO) -> str:
    if configured not in _FORMATS:
        from gitreg.errors import ConfigError

        raise ConfigError(f"log_format must be one of {', '.join(_FORMATS)}, got {configured!r}")
    if configured != "auto":
        return configured
    return "text" if stream.isatty() else "json"


def configure(log_format: str, level: str | int, stream: TextIO | None = None) -> None:
    """Route every logger, uvicorn's included, through one handler."""
    out = stream or sys.stderr
    handler = logging.StreamHandler(out)
    handler.addFilter(ContextAndRedaction())
    json_lines = resolve_format(log_format, out) == "json"
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    _json_handler[0] = handler if json_lines else None
    _text_handler[0] = None if json_lines else handler
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # urllib3 (dulwich's HTTP client) warns of each retry before the request
    # fails; gitreg reports the failure itself, once. Its lines stay for debug.
    debug = root.getEffectiveLevel() <= logging.DEBUG
    logging.getLogger("urllib3").setLevel(logging.DEBUG if debug else logging.ERROR)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    if _CUT_ON_PURPOSE not in logging.getLogger("uvicorn.error").filters:
        logging.getLogger("uvicorn.error").addFilter(_CUT_ON_PURPOSE)


def announce(message: str, prefix: str = "gitreg: ") -> None:
    """A start-up line of `serve` for whoever started it ("serving https://...",
    the local CA to trust): with JSON logs, one object on the log stream like
    every other line (logger `gitreg.server`); otherwise printed as it reads."""
    if _json_handler[0] is not None:
        logging.getLogger("gitreg.server").info(message)
    else:
        print(prefix + message, flush=True)


def report_error(message: str) -> None:
    """The one line a command that fails ends with: `gitreg: error: ...` on
    standard error, or, once `serve` has set up JSON logs, one JSON object."""
    if _json_handler[0] is not None:
        logging.getLogger("gitreg").error(message)
    else:
        print(f"gitreg: error: {message}", file=sys.stderr, flush=True)


class _CutOnPurpose(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" traceback for a ResponseCut:
    the body was cut short on purpose and its one log line already says why
    (gitreg/mirror/http_stream.py, gitreg/api/blobs.py); raising is how an ASGI app
    makes the server close the connection short of the Content-Length. Any other
    exception is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        from gitreg.errors import ResponseCut

        exc = record.exc_info[1] if record.exc_info else None
        for _ in range(8):  # Starlette may wrap it; a short chain is enough
            if exc is None or isinstance(exc, ResponseCut):
                break
            exc = exc.__cause__ or exc.__context__
        return not isinstance(exc, ResponseCut)


_CUT_ON_PURPOSE = _CutOnPurpose()


# The access line's fast path: the handler `configure` set up for JSON, whose
# lines `access_json` writes itself, the very line JsonFormatter would, without
# a LogRecord, the filter's redaction of a message that holds no free text, or
# json.dumps of a dict, which together were a large part of a metadata answer's
# cost (docs/performance.md, "Default install").
_json_handler: list[logging.StreamHandler[TextIO] | None] = [None]
_second: list[Any] = [-1, ""]  # the last whole second and its formatted prefix
_ACCESS = logging.getLogger("gitreg.access")


def _timestamp(now: float) -> str:
    whole = int(now)
    if whole != _second[0]:
        _second[0], _second[1] = whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{_second[1]}.{int((now - whole) * 1000):03d}Z"


# (method, route) -> the access line's constant pieces: the message's start and
# the `method` and `route` fields, JSON-encoded once.
_pieces: dict[tuple[str, str], tuple[str, str]] = {}


def _line_pieces(method: str, route: str) -> tuple[str, str]:
    found = _pieces.get((method, route))
    if found is None:
        m, r = encode_basestring_ascii(method), encode_basestring_ascii(route)
        found = (f"{m[1:-1]} {r[1:-1]} ", f',"method":{m},"route":{r},"status":')
        if len(_pieces) < 1024:  # methods come from clients: stay bounded
            _pieces[(method, route)] = found
    return found


def _fast_path(handler: logging.StreamHandler[TextIO] | None) -> bool:
    """Whether gitreg's JSON handler alone receives `gitreg.access` records; a
    handler anyone else added (a test's log capture) must get the records."""
    root = logging.root
    return not (
        handler is None
        or _ACCESS.handlers
        or not _ACCESS.propagate
        or len(root.handlers) != 1
        or root.handlers[0] is not handler
        or handler.level > logging.INFO
    )


def access_json(
    method: str,
    route: str,
    status: int,
    seconds: float,
    size: int,
    client: str | None,
    token_id: int | None,
) -> bool:
    """Write the access line JsonFormatter would write for gitreg.server.access_log
    (the same keys in the same order); False, with nothing written, when it
    must go through logging instead (_fast_path)."""
    handler = _json_handler[0]
    if handler is None or not _fast_path(handler):
        return False
    msg, fields = _line_pieces(method, route)
    context = ""
    if (rid := request_id.get()) is not None:
        context = f',"request_id":{encode_basestring_ascii(rid)}'
    if (current := job.get()) is not None:
        context += f',"job_id":{current[0]},"repo_id":{current[1]}'
    line = (
        f'{{"ts":"{_timestamp(time.time())}","level":"info","logger":"gitreg.access",'
        f'"msg":"{msg}{status} {seconds * 1000:.1f}ms"{context}{fields}{status},'
        f'"duration_ms":{round(seconds * 1000, 2)!r},"bytes":{size},'
        f'"client":{"null" if client is None else encode_basestring_ascii(client)},'
        f'"token_id":{"null" if token_id is None else int(token_id)}}}\n'
    )
    _write(handler, line)
    return True


def _write(handler: logging.StreamHandler[TextIO], line: str) -> None:
    # The lock handler.acquire() takes, without its two method calls per line;
    # job threads log through the same stream.
    with handler.lock or contextlib.nullcontext():
        try:
            handler.stream.write(line)
            handler.stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken log stream must not fail the request (as logging)


# The text access line's fast path: the line TextFormatter would write, without
# a LogRecord and the filter, as access_json does for JSON (docs/performance.md,
# "Download answer and the text access line").
_text_handler: list[logging.StreamHandler[TextIO] | None] = [None]
_local_second: list[Any] = [-1, ""]  # the last whole second, formatted as asctime


def _asctime(now: float) -> str:
    """logging.Formatter.formatTime's default: local time, comma, milliseconds."""
    whole = int(now)
    if whole != _local_second[0]:
        prefix = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(whole))
        _local_second[0], _local_second[1] = whole, prefix
    return f"{_local_second[1]},{int((now - whole) * 1000):03d}"


def access_text(
    method: str,
    route: str,
    status: int,
    seconds: float,
    size: int,
    client: str | None,
    token_id: int | None,
) -> bool:
    """Write the access line TextFormatter would write for gitreg.server.access_log;
    False, with nothing written, when it must go through logging (_fast_path)."""
    handler = _text_handler[0]
    if handler is None or not _fast_path(handler):
        return False
    context = []
    if (rid := request_id.get()) is not None:
        context.append(f"request_id={rid}")
    if (current := job.get()) is not None:
        context.append(f"job_id={current[0]} repo_id={current[1]}")
    context.append(
        f"method={method} route={route} status={status}"
        f" duration_ms={round(seconds * 1000, 2)!r} bytes={size}"
    )
    if client is not None:
        context.append(f"client={client}")
    if token_id is not None:
        context.append(f"token_id={token_id}")
    line = (
        f"{_asctime(time.time())} INFO gitreg.access: {method} {route} {status}"
        f" {seconds * 1000:.1f}ms [{' '.join(context)}]\n"
    )
    _write(handler, line)
    return True


def failure(logger: logging.Logger, exc: BaseException, message: str, *args: object) -> None:
    """Log a failure its caller survives (a loop's round, a background task):
    storage that is away (`is_outage`: S3, the database) is one warning line
    with the reason, as it comes back by itself; anything else is a bug, logged
    as an error with its traceback."""
    if is_outage(exc):
        logger.warning(f"{message}: %s", *args, operator_text(exc))
    else:
        logger.error(message, *args, exc_info=exc)
