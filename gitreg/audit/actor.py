"""Who is acting, as the audit log names them.

The actor travels in a context variable: the CLI sets the operator once per
command, the access policy sets the holder of the credentials a request
authenticated with, and every audit row written meanwhile, in the request's
task or the worker threads it starts, names them. Nothing sets it for the
server's own work (reconciles, webhook deliveries): those rows name `system`.
A job's run names whoever asked for the job (`acting_as`).
"""

from __future__ import annotations

import contextvars
import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    kind: str  # operator | token | person | workload | system
    name: str  # "token #12", "alice@example.com", a workload's issuer and subject
    rule: str = ""  # for a workload identity: the rules that matched it
    client: str = ""  # the client's address; "cli" for an operator's command

    @classmethod
    def operator(cls) -> Actor:
        """The person running a command on the registry host."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls("operator", user, client="cli")


SYSTEM = Actor("system", "gitreg")

_current: contextvars.ContextVar[Actor] = contextvars.ContextVar("audit_actor", default=SYSTEM)


def current() -> Actor:
    return _current.get()


def act_as(actor: Actor) -> None:
    """Name `actor` for the rest of this context (a request's task, a command)."""
    _current.set(actor)


@contextmanager
def acting_as(actor: Actor) -> Iterator[None]:
    """Name `actor` within the block only (a job run on a long-lived thread)."""
    token = _current.set(actor)
    try:
        yield
    finally:
        _current.reset(token)
