"""What one doctor check found: a status and what to do about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["ok", "warn", "FAIL"]


@dataclass(frozen=True)
class CheckResult:
    check: str  # a stable name for automation, e.g. "free_space"
    status: Status
    message: str  # what was found and, unless ok, what to do

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        return f"{self.status:<4} {self.check}: {self.message}"


def ok(check: str, message: str) -> CheckResult:
    return CheckResult(check, "ok", message)


def warn(check: str, message: str) -> CheckResult:
    return CheckResult(check, "warn", message)


def fail(check: str, message: str) -> CheckResult:
    return CheckResult(check, "FAIL", message)
