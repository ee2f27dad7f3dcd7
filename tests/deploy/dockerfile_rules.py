"""Our Dockerfile linter: the rules that matter for gitreg's image.

hadolint is not installable here, so the file is parsed with `dockerfile-parse`
(the instructions, continuation lines joined) and checked against our own rules:
a multi-stage build, every base pinned by tag and digest, a non-root USER and a
HEALTHCHECK in the final stage, and nothing that can put a secret in a layer
(secret-looking ENV/ARG names, copying the whole context or key-like files, ADD
from a URL).
"""

from __future__ import annotations

import io
import re
import shlex
from typing import Any

from dockerfile_parse import DockerfileParser

PINNED = re.compile(r"^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$")
SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|PRIVATE|CREDENTIAL|API_?KEY|ACCESS_KEY")
SECRET_FILE = re.compile(r"(^|/)(\.env|\.git|secrets?|id_[a-z0-9]+|.*\.(pem|key|p12|pfx))(/|$)")


def _stages(instructions: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    stages: list[list[dict[str, Any]]] = []
    for instruction in instructions:
        if instruction["instruction"] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _check_from(value: str, names: set[str]) -> list[str]:
    parts = value.split()
    image = next(p for p in parts if not p.startswith("--"))
    problems = []
    if image not in names and (not PINNED.match(image) or ":latest@" in image):
        problems.append(f"FROM {image}: pin the base by version tag and @sha256 digest")
    if len(parts) >= 3 and parts[-2].upper() == "AS":
        names.add(parts[-1])
    return problems


def _variable_names(instruction: str, value: str) -> list[str]:
    words = shlex.split(value)
    if instruction == "ENV" and words and "=" not in words[0]:
        return words[:1]  # the legacy `ENV NAME value` form
    return [word.split("=", 1)[0] for word in words]


def _check_copy(instruction: str, value: str) -> list[str]:
    words = shlex.split(value)
    if any(word.startswith("--from") for word in words):
        return []  # from another stage, not from the build context
    sources = [w for w in words if not w.startswith("--")][:-1]
    problems = []
    for source in sources:
        if source.rstrip("/") in (".", "./", "") or any(c in source for c in "*?["):
            problems.append(f"{instruction} {source}: copy named files, not the whole context")
        elif SECRET_FILE.search(source):
            problems.append(f"{instruction} {source}: looks like a secret; mount it at run time")
        elif instruction == "ADD" and "://" in source:
            problems.append(f"ADD {source}: downloads unpinned content into a layer")
    return problems


def _check_final(stage: list[dict[str, Any]]) -> list[str]:
    problems = []
    users = [i["value"].split(":")[0].strip() for i in stage if i["instruction"] == "USER"]
    if not users or users[-1] in ("root", "0"):
        problems.append("the final stage must end with a non-root USER")
    checks = [i["value"] for i in stage if i["instruction"] == "HEALTHCHECK"]
    if not checks or checks[-1].strip().upper() == "NONE":
        problems.append("the final stage needs a HEALTHCHECK")
    return problems


def violations(text: str) -> list[str]:
    """Every rule the Dockerfile `text` breaks, one message each (empty: clean)."""
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    instructions = [i for i in parser.structure if i["instruction"] != "COMMENT"]
    stages = _stages(instructions)
    if not stages:
        return ["no FROM instruction"]
    problems = [] if len(stages) > 1 else ["use a multi-stage build: build tools stay behind"]
    names: set[str] = set()
    for instruction in instructions:
        kind, value = instruction["instruction"], instruction["value"]
        if kind == "FROM":
            problems += _check_from(value, names)
        elif kind in ("ENV", "ARG"):
            for name in _variable_names(kind, value):
                if SECRET_NAME.search(name.upper()):
                    problems.append(f"{kind} {name}: secrets in ENV/ARG stay in the image")
        elif kind in ("COPY", "ADD"):
            problems += _check_copy(kind, value)
    return problems + _check_final(stages[-1])
