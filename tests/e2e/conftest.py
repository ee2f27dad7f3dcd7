"""Every test here is end to end (real gitreg servers, the real Terraform CLI,
Chromium) and marked `slow`: `pytest -m 'not slow'` leaves them out."""

from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.slow)
