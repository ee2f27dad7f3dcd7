"""The catalog tests' services: a fresh data directory each (a test file may
define its own `svc`, with other settings)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitreg.services import Services, build_services
from gitreg.settings import load_settings


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Services]:
    services = build_services(load_settings({"data_dir": tmp_path / "data"}, environ={}))
    yield services
    services.close()
