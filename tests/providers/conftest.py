"""Fixtures shared by the provider tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.services import Services
from tests.support.provider_dist import make_services, public_armor, publisher_key


@pytest.fixture
def svc(tmp_path: Path) -> Services:
    """Services on a fresh data directory that trusts the `acme` publisher key."""
    services = make_services(tmp_path / "data")
    services.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    return services
