"""Who uses what: "who still downloads 1.x of platform/vpc/aws in
the last 30 days".

Downloads are counted per version, UTC day and token (gitreg/usage/counter.py),
and a token names its owner: a `terraform login` or web sign-in token the
person (email, else subject) and the groups they had when they signed in
(migration 0019); an operator token its description, else its prefix. This
module sums one module's counts over a window of days and groups them three
ways, each sorted by downloads, most first:

- per version;
- per person: every token of one person adds up; a request without a token is
  "anonymous", as is one whose token row no longer exists;
- per team: each group of a sign-in token's owner. A person in two groups
  counts in both, so team totals may add up to more than the downloads.
  Operator tokens and anonymous downloads belong to no team.

The version filter (`versions`) is either a prefix of numbers, `1` (every
1.x.y), `1.2` (every 1.2.y) or `1.2.3` (that version, prereleases of it
included), or else a Terraform version constraint parsed by gitreg/versions.py
(`>= 1.2, < 2`, `~> 1.4`), which, as in Terraform, selects prereleases only
when named exactly. A bare number is a prefix, never Terraform's `= 1.0.0`.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gitreg.errors import BadRequest, NotAVersion, NotFound
from gitreg.storage.protocols import ModuleIndex
from gitreg.usage.store import DownloadCountIndex, UsageRow
from gitreg.versions import Constraints, parse_constraints, parse_version

DEFAULT_DAYS = 30
RECENT_TTL = 60.0  # seconds the UI's 30-day totals are kept
MAX_DAYS = 365  # a year of daily rows per version and token is what one query sums
_PREFIX = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,9}){0,2}$")


@dataclass(frozen=True)
class VersionFilter:
    text: str = ""  # "" selects every version
    prefix: tuple[int, ...] = ()
    constraints: Constraints | None = None

    def allows(self, version: str) -> bool:
        if not self.text:
            return True
        try:
            parsed = parse_version(version)
        except NotAVersion:
            return False
        if self.constraints is not None:
            return self.constraints.allows(parsed)
        numbers = (parsed.major, parsed.minor, parsed.patch)
        return numbers[: len(self.prefix)] == self.prefix


def parse_version_filter(text: str) -> VersionFilter:
    """A prefix (`1`, `1.2`, `1.2.3`) or a Terraform constraint; BadRequest otherwise."""
    text = text.strip()
    if not text:
        return VersionFilter()
    if _PREFIX.match(text):
        return VersionFilter(text, tuple(int(n) for n in text.split(".")))
    return VersionFilter(text, constraints=parse_constraints(text))  # ConstraintError is a 400


def check_days(days: int) -> int:
    if not 1 <= days <= MAX_DAYS:
        raise BadRequest(f"days must be between 1 and {MAX_DAYS}, not {days}")
    return days


@dataclass
class Tally:
    """Downloads of one person or team, in total and per version."""

    name: str
    kind: str  # "person", "token", "anonymous" or "team"
    downloads: int = 0
    versions: dict[str, int] = field(default_factory=dict)
    people: set[str] = field(default_factory=set)  # teams only

    def add(self, version: str, count: int) -> None:
        self.downloads += count
        self.versions[version] = self.versions.get(version, 0) + count

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "team":
            found["people"] = len(self.people)
        found["downloads"] = self.downloads
        found["versions"] = _ranked(self.versions)
        return found


@dataclass(frozen=True)
class Usage:
    module: str
    versions: str
    days: int
    since: str  # the window's first UTC day, YYYY-MM-DD; it ends today
    downloads: int
    per_version: dict[str, int]
    people: list[Tally]
    teams: list[Tally]

    def to_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "versions": self.versions,
            "days": self.days,
            "since": self.since,
            "downloads": self.downloads,
            "per_version": _ranked(self.per_version),
            "people": [p.to_json() for p in self.people],
            "teams": [t.to_json() for t in self.teams],
        }


def _ranked(counts: dict[str, int]) -> list[dict[str, Any]]:
    order = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"version": v, "downloads": n} for v, n in order]


def _person(row: UsageRow) -> tuple[str, str]:
    """(kind, name) of who downloaded: a signed-in person, an operator token or nobody."""
    if row.subject:
        return "person", row.email or row.subject
    if row.prefix:
        return "token", row.description or row.prefix
    return "anonymous", "anonymous"


def _sorted(tallies: dict[tuple[str, str], Tally]) -> list[Tally]:
    return sorted(tallies.values(), key=lambda t: (-t.downloads, t.kind, t.name))


class DownloadUsage:
    """Who downloaded what: the report behind `gitreg module usage`, its API
    route and the module page's Usage tab."""

    def __init__(self, *, counts: DownloadCountIndex, modules: ModuleIndex) -> None:
        self._counts = counts
        self._modules = modules
        self._recent: tuple[float, str, dict[int, int]] = (0.0, "", {})
        self._recent_lock = threading.Lock()

    def recent_module_downloads(self, today: datetime.date | None = None) -> dict[int, int]:
        """Downloads per module id over the last DEFAULT_DAYS UTC days, today
        included, every version and reader together: what the UI's search
        sorts by. Aggregate counts only. Read again at most once a minute
        (one query over the window's rows, not one per search)."""
        today = today or datetime.datetime.now(datetime.UTC).date()
        since = (today - datetime.timedelta(days=DEFAULT_DAYS - 1)).isoformat()
        with self._recent_lock:
            read_at, day, found = self._recent
            if day == since and time.monotonic() - read_at < RECENT_TTL:
                return found
        found = self._counts.recent_totals("module", since)
        with self._recent_lock:
            self._recent = (time.monotonic(), since, found)
        return found

    def module_usage(
        self,
        namespace: str,
        name: str,
        system: str,
        versions: str = "",
        days: int = DEFAULT_DAYS,
        today: datetime.date | None = None,
    ) -> Usage:
        """Who downloaded a module's versions in the last `days` UTC days, today
        included. BadRequest for a bad version filter or a number of days out of
        1 to MAX_DAYS, NotFound for a module that is not registered. The caller
        has checked that its reader may see it (publish on the namespace)."""
        wanted = parse_version_filter(versions)
        days = check_days(days)
        module = self._modules.find_module(namespace, name, system)
        if module is None:
            raise NotFound(f"module {namespace}/{name}/{system} not found")
        today = today or datetime.datetime.now(datetime.UTC).date()
        since = (today - datetime.timedelta(days=days - 1)).isoformat()
        per_version: dict[str, int] = {}
        people: dict[tuple[str, str], Tally] = {}
        teams: dict[tuple[str, str], Tally] = {}
        for row in self._counts.usage_rows("module", module.id, since):
            if not wanted.allows(row.version):
                continue
            per_version[row.version] = per_version.get(row.version, 0) + row.downloads
            kind, who = _person(row)
            people.setdefault((kind, who), Tally(who, kind)).add(row.version, row.downloads)
            for group in row.groups if kind == "person" else ():
                team = teams.setdefault(("team", group), Tally(group, "team"))
                team.add(row.version, row.downloads)
                team.people.add(who)
        return Usage(
            module.address,
            wanted.text,
            days,
            since,
            sum(per_version.values()),
            per_version,
            _sorted(people),
            _sorted(teams),
        )
