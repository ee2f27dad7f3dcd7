"""`run_checks` reads gitreg's storage only when opening it changes nothing,
and a storage it cannot read fails the checks that needed it."""

from __future__ import annotations

import pytest

from gitreg.doctor.service import CheckResult, Stored, run_checks
from gitreg.errors import ConfigError
from gitreg.settings import Settings, load_settings
from tests.doctor.conftest import Setup

STORED_CHECKS = ("remotes", "webhook_secrets", "signing_keys")


class Reader:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls = 0
        self.error = error

    def __call__(self) -> Stored:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return Stored(repos=[], signing_keys=[])


def _settings(setup: Setup) -> Settings:
    return load_settings({"data_dir": setup.data}, environ={})


def _by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


def test_storage_is_read_only_once_its_schema_is_current(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    reader = Reader()
    before = _by_name(run_checks(_settings(setup), reader, timeout=5))
    assert reader.calls == 0  # no index yet: opening one would create it
    assert before["remotes"].status == "ok" and "no index" in before["remotes"].message
    assert not (setup.data / "index.sqlite3").exists()

    code, _ = setup.run(capsys, "jobs", "reconcile")  # creates the index
    assert code == 0
    after = _by_name(run_checks(_settings(setup), reader, timeout=5))
    assert reader.calls == 1
    assert [after[name].status for name in STORED_CHECKS] == ["ok", "ok", "ok"]


def test_storage_that_cannot_be_read_fails_the_checks_that_need_it(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.run(capsys, "jobs", "reconcile")
    reason = "the secret key does not open this database"
    results = _by_name(run_checks(_settings(setup), Reader(ConfigError(reason)), timeout=5))
    for name in STORED_CHECKS:
        assert results[name].status == "FAIL"
        assert results[name].message == f"cannot open gitreg's storage: {reason}"
