"""An ASGI app served by uvicorn over TLS from a thread of the test process:
the fakes of what tests cannot reach (forges, issuers, upstream registries)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp


class ThreadedServer:
    def __init__(self, app: ASGIApp, port: int, cert: Path, key: Path) -> None:
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            log_level="warning",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, what: str, timeout: float = 20) -> None:
        """Return once it listens; `what` names it when it does not start."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise AssertionError(f"{what} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(10)
