"""`services(request)`: the typed way a handler reaches the process's Services."""

from __future__ import annotations

from starlette.requests import Request

from gitreg.errors import DatabaseUnavailable
from gitreg.services import Services


def services(request: Request) -> Services:
    """The app's Services; `DatabaseUnavailable` (503) while a replica started
    with PostgreSQL down still waits for it (gitreg/api/startup.py)."""
    found = request.app.state.services
    if found is None:
        reason = "not reachable since start-up"
        raise DatabaseUnavailable(reason, reason=reason)
    assert isinstance(found, Services)
    return found
