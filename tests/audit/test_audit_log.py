"""The audit log (gitreg/audit/) on SQLite and PostgreSQL: a row commits in the
same transaction as the action it records, or not at all; listing filters and
pages; old rows are pruned."""

from __future__ import annotations

import json
import logging

import pytest

from gitreg.audit import store_sql
from gitreg.audit.actor import Actor
from gitreg.audit.service import AuditLog
from gitreg.audit.store import AuditQuery
from gitreg.audit.store_sql import AuditStore
from gitreg.auth.store_sql import AuthStore
from gitreg.auth.tokens import Tokens
from gitreg.errors import NotFound
from gitreg.logs import JsonFormatter
from gitreg.storage.index import Index

OPERATOR = Actor("operator", "alice", client="cli")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _tokens(index: Index, audit: AuditLog) -> Tokens:
    return Tokens(AuthStore(index), lambda: None, audit=audit)


def test_an_action_and_its_row_commit_together(index: Index) -> None:
    audit = AuditLog(AuditStore(index), 400)
    made = _tokens(index, audit).create(
        "read",
        ["acme"],
        "1d",
        "ci",
    )
    (row,) = audit.entries(AuditQuery(action="token.create"))
    assert (row.result, row.object, row.detail) == (
        "ok",
        f"token {made.secret[:12]}",
        "read on acme",
    )


def test_a_row_that_cannot_be_written_rolls_the_action_back(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = AuditLog(AuditStore(index), 400)
    tokens = _tokens(index, audit)
    monkeypatch.setattr(store_sql, "_INSERT", "INSERT INTO no_such_table VALUES (?)")
    with pytest.raises(Exception):  # noqa: B017 - the engine's error, whichever it is
        tokens.create("read", ["acme"])
    assert tokens.active() == []  # the token's insert was in the row's transaction


def test_a_failed_action_is_one_failed_row(index: Index) -> None:
    audit = AuditLog(AuditStore(index), 400)
    with pytest.raises(NotFound):
        _tokens(index, audit).revoke(42)
    (row,) = audit.entries(AuditQuery())
    assert (row.action, row.object, row.result) == ("token.revoke", "token #42", "failed")
    assert "42" in row.detail


def test_rows_filter_page_and_prune(index: Index) -> None:
    clock = Clock()
    audit = AuditLog(AuditStore(index), 30, clock=clock)
    ci = Actor("workload", "https://token.actions.githubusercontent.com repo:acme/x", "rules[2]")
    audit.record("token.create", "token gitreg_abcde", who=OPERATOR)
    clock.now += 40 * 86400
    audit.record("provider.publish", "acme/ourcloud 1.0.0", who=ci)
    audit.record("provider.yank", "acme/ourcloud 1.0.0", who=OPERATOR)
    assert [r.action for r in audit.entries(AuditQuery(actor="repo:acme"))] == ["provider.publish"]
    assert [r.action for r in audit.entries(AuditQuery(actor="RULES[2]"))] == ["provider.publish"]
    assert [r.action for r in audit.entries(AuditQuery(action="provider.*"))] == [
        "provider.yank",
        "provider.publish",
    ]
    assert len(audit.entries(AuditQuery(object="OURCLOUD"))) == 2
    assert len(audit.entries(AuditQuery(since=clock.now - 86400))) == 2
    first = audit.entries(AuditQuery(limit=1))
    second = audit.entries(AuditQuery(limit=5, before_id=first[0].id))
    assert [r.action for r in first + second] == [
        "provider.yank",
        "provider.publish",
        "token.create",
    ]
    assert audit.entries(AuditQuery(action="100%_literal")) == []
    assert audit.prune() == 1  # older than 30 days
    assert len(audit.entries(AuditQuery())) == 2


def test_the_action_filter_ignores_case_on_both_engines(index: Index) -> None:
    audit = AuditLog(AuditStore(index), 30)
    audit.record("provider.publish", "acme/ourcloud 1.0.0", who=OPERATOR)
    audit.record("token.create", "token gitreg_abcde", who=OPERATOR)
    for wanted in ("provider.publish", "Provider.Publish", "PROVIDER.*", "*.PUBLISH"):
        assert [r.action for r in audit.entries(AuditQuery(action=wanted))] == [
            "provider.publish"
        ], wanted


def test_each_row_is_one_json_log_line(index: Index, caplog: pytest.LogCaptureFixture) -> None:
    audit = AuditLog(AuditStore(index), 400)
    with caplog.at_level(logging.INFO, logger="gitreg.audit"):
        audit.record("namespace.visibility", "acme", detail="private", who=OPERATOR)
    (record,) = [r for r in caplog.records if r.name == "gitreg.audit"]
    line = json.loads(JsonFormatter().format(record))
    assert line["audit_action"] == "namespace.visibility"
    assert line["audit_actor"] == {"kind": "operator", "name": "alice", "rule": ""}
    assert line["audit_object"] == "acme"
    assert line["audit_result"] == "ok"


def test_a_change_of_the_access_tables_is_one_row_at_the_next_start(index: Index) -> None:
    audit = AuditLog(AuditStore(index), 400)
    grants = {"grants": [{"group": "sre", "namespace": "*", "scope": "admin"}]}
    for _ in range(2):  # two workers starting, then a restart without a change
        audit.note_access_tables({**grants, "workload_identity": None})
    assert len(audit.entries(AuditQuery(action="config.access"))) == 1
    rules = [{"issuer": "https://token.actions.githubusercontent.com", "rules": []}]
    audit.note_access_tables({**grants, "workload_identity": rules})
    newest, first = audit.entries(AuditQuery(action="config.access"))
    assert newest.detail.startswith("1 [[grants]], 1 [[workload_identity]]; sha256 ")
    assert first.detail.startswith("1 [[grants]], 0 [[workload_identity]]; sha256 ")
    assert newest.actor_kind == "system"
