"""deploy/Dockerfile against our rules (tests/deploy/dockerfile_rules.py), and
the rules against Dockerfiles that break each of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from tests.deploy.dockerfile_rules import violations

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
TEXT = DOCKERFILE.read_text()
BASE = TEXT.split("FROM ", 2)[1].split()[0]


def _final_stage() -> DockerfileParser:
    parser = DockerfileParser(str(DOCKERFILE))
    assert len(parser.parent_images) == 2
    return parser


def test_the_dockerfile_follows_every_rule() -> None:
    assert violations(TEXT) == []


def test_the_image_runs_gitreg_serve_as_a_non_root_user_with_a_data_volume() -> None:
    parser = _final_stage()
    instructions = {i["instruction"]: i["value"] for i in parser.structure}
    assert json.loads(instructions["ENTRYPOINT"]) == ["gitreg-entrypoint", "gitreg"]
    assert json.loads(instructions["CMD"]) == ["serve"]
    assert instructions["USER"] == "10001:10001"
    assert json.loads(instructions["VOLUME"]) == [parser.envs["GITREG_DATA_DIR"]]
    assert parser.envs["GITREG_HOST"] == "0.0.0.0"
    assert "gitreg-healthcheck" in instructions["HEALTHCHECK"]
    labels = parser.labels
    for key in ("title", "version", "revision", "licenses", "description"):
        assert f"org.opencontainers.image.{key}" in labels


def test_every_file_the_image_copies_from_the_context_exists() -> None:
    # A renamed file would otherwise only fail `docker build`, which no test runs.
    parser = _final_stage()
    for instruction in parser.structure:
        if instruction["instruction"] == "COPY" and "--from" not in instruction["value"]:
            for source in instruction["value"].split()[:-1]:
                assert (ROOT / source).exists(), source


GOOD_STAGES = f"FROM {BASE} AS build\nRUN true\nFROM {BASE}\n"
GOOD_TAIL = 'USER 10001\nHEALTHCHECK CMD ["true"]\n'

BROKEN = {
    "single stage": (f"FROM {BASE}\n{GOOD_TAIL}", "multi-stage"),
    "unpinned base": (
        f"FROM python:3.11-slim AS build\nFROM {BASE}\n{GOOD_TAIL}",
        "FROM python:3.11-slim",
    ),
    "latest tag": (
        f"FROM python:latest@sha256:{'a' * 64} AS build\nFROM {BASE}\n{GOOD_TAIL}",
        "FROM python:latest",
    ),
    "root user": (GOOD_STAGES + 'USER root\nHEALTHCHECK CMD ["true"]\n', "non-root USER"),
    "no user": (GOOD_STAGES + 'HEALTHCHECK CMD ["true"]\n', "non-root USER"),
    "no healthcheck": (GOOD_STAGES + "USER 10001\n", "HEALTHCHECK"),
    "healthcheck none": (GOOD_STAGES + "USER 10001\nHEALTHCHECK NONE\n", "HEALTHCHECK"),
    "secret env": (GOOD_STAGES + "ENV AWS_SECRET_ACCESS_KEY=abc\n" + GOOD_TAIL, "ENV AWS_SECRET"),
    "legacy env": (GOOD_STAGES + "ENV DB_PASSWORD hunter2\n" + GOOD_TAIL, "ENV DB_PASSWORD"),
    "secret arg": (GOOD_STAGES + "ARG GITHUB_TOKEN\n" + GOOD_TAIL, "ARG GITHUB_TOKEN"),
    "whole context": (GOOD_STAGES + "COPY . /src\n" + GOOD_TAIL, "COPY .:"),
    "glob": (GOOD_STAGES + "COPY *.toml /src/\n" + GOOD_TAIL, "COPY *.toml"),
    "key file": (GOOD_STAGES + "COPY tls/server.key /etc/\n" + GOOD_TAIL, "secret"),
    "dotenv": (GOOD_STAGES + "COPY .env /app/\n" + GOOD_TAIL, "secret"),
    "add url": (GOOD_STAGES + "ADD https://example.com/x.tgz /x\n" + GOOD_TAIL, "ADD https"),
}


def test_a_dockerfile_that_breaks_no_rule_passes() -> None:
    assert violations(GOOD_STAGES + "COPY --from=build /opt /opt\nENV A=1\n" + GOOD_TAIL) == []


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_rule_catches_its_violation(name: str) -> None:
    text, expected = BROKEN[name]
    found = violations(text)
    assert len(found) == 1 and expected in found[0], found
